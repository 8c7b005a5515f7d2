# transcoder service image. Build: docker build -t transcoder:0.1.0 .
# Run:   docker run -v $PWD/config.yaml:/etc/transcoder/config.yaml transcoder:0.1.0
# CI lints it with hadolint (tests/unit/deploy/test_dockerfile.py) and runs its pip steps outside Docker
# (tests/integration/test_image_steps.py).
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY transcoder ./transcoder
# Wheels only for the runtime (no dev or spark extras): the same pinned versions CI tests.
RUN pip wheel --no-cache-dir --wheel-dir /wheels -c constraints.txt .

FROM python:3.11-slim-bookworm
RUN useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin transcoder
COPY --from=build /wheels /wheels
# The wheel the build stage made, by file (a pin hadolint accepts), its dependencies from the same directory.
RUN pip install --no-cache-dir --no-index --find-links /wheels /wheels/transcoder-*.whl && rm -rf /wheels
USER 10001
ENV PYTHONUNBUFFERED=1
EXPOSE 9308
ENTRYPOINT ["transcoder"]
CMD ["run", "--config", "/etc/transcoder/config.yaml"]
