{{- define "transcoder.name" -}}{{ .Release.Name }}-transcoder{{- end -}}
{{- define "transcoder.labels" -}}
app.kubernetes.io/name: transcoder
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
