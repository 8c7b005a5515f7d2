# transcoder service image. Build: docker build -t transcoder:0.1.0 .
# Run:   docker run -v $PWD/config.yaml:/etc/transcoder/config.yaml transcoder:0.1.0
# CI lints it with hadolint (tests/unit/deploy/test_dockerfile.py) and runs its pip steps outside Docker
# (tests/integration/test_image_steps.py).
FROM python:3.11-slim-bookworm AS build
# The compiled hot path (native/) is Rust: the toolchain comes from the official Rust image, and a C compiler and
# linker from Debian (the codecs' C sources, the extension's link). The runtime stage carries neither.
COPY --from=rust:1.95-slim-bookworm /usr/local/cargo /usr/local/cargo
COPY --from=rust:1.95-slim-bookworm /usr/local/rustup /usr/local/rustup
ENV CARGO_HOME=/usr/local/cargo RUSTUP_HOME=/usr/local/rustup PATH=/usr/local/cargo/bin:$PATH
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY native ./native
COPY transcoder ./transcoder
# Wheels only for the runtime (no dev or spark extras): the same pinned versions CI tests; transcoder-native's
# wheel is built here by maturin (from PyPI) with cargo (crates from crates.io, as native/Cargo.lock pins them).
RUN pip wheel --no-cache-dir --wheel-dir /wheels -c constraints.txt ./native .

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
