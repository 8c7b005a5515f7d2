{{- define "transcoder.name" -}}{{ .Release.Name }}-transcoder{{- end -}}
{{- define "transcoder.labels" -}}
app.kubernetes.io/name: transcoder
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The Secret mounted at secret.mountPath: the existing one, the chart's own, or none (empty). */}}
{{- define "transcoder.secretName" -}}
{{- if .Values.secret.existingSecret -}}{{ .Values.secret.existingSecret }}
{{- else if .Values.secret.create -}}{{ include "transcoder.name" . }}
{{- end -}}
{{- end -}}

{{/*
terminationGracePeriodSeconds: the value set, or config.shutdown_timeout_s (default 30) + the margin.
On SIGTERM the service stops within shutdown_timeout_s + 5 s (SHUTDOWN_MARGIN_S), so a shorter grace
period would kill a pod before it has committed what it copied: refused.
*/}}
{{- define "transcoder.terminationGracePeriodSeconds" -}}
{{- $shutdown := .Values.config.shutdown_timeout_s | default 30 | float64 -}}
{{- $stops := addf $shutdown 5 -}}
{{- $grace := .Values.terminationGracePeriodSeconds -}}
{{- if kindIs "invalid" $grace -}}
{{- $grace = add (ceil $shutdown | int) .Values.terminationGracePeriodMarginSeconds -}}
{{- end -}}
{{- if le (float64 $grace) $stops -}}
{{- fail (printf "terminationGracePeriodSeconds (%v) must be longer than config.shutdown_timeout_s + 5 (%v): a pod would be killed before it commits" $grace $stops) -}}
{{- end -}}
{{- $grace | int -}}
{{- end -}}

{{/*
The transcoder config: the values' config, with metrics.web_config_file pointing into the mounted webConfig
Secret when there is one (a different web_config_file set in config beside it is refused: one would be unread).
*/}}
{{- define "transcoder.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- with .Values.webConfig.existingSecret -}}
{{- $file := printf "%s/web-config.yml" (trimSuffix "/" $.Values.webConfig.mountPath) -}}
{{- $set := $config.metrics.web_config_file | default $file -}}
{{- if ne $set $file -}}
{{- fail (printf "config.metrics.web_config_file (%s) and webConfig.existingSecret (mounted as %s) are both set: set one" $set $file) -}}
{{- end -}}
{{- $_ := set $config.metrics "web_config_file" $file -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}
