# Switchboard: one image for every process (gateway, worker, scheduler, serve, chat).
# Build: docker build -t switchboard .   Run: see deploy/docker-compose.yml and docs/deploy.md.

FROM python:3.11-slim AS build
WORKDIR /src
RUN python -m venv /opt/switchboard
COPY pyproject.toml README.md ./
COPY core ./core
COPY channels ./channels
COPY bots ./bots
COPY profiles ./profiles
RUN /opt/switchboard/bin/pip install --no-cache-dir .

FROM python:3.11-slim
LABEL org.opencontainers.image.title="switchboard" \
      org.opencontainers.image.description="A multi-channel LLM chat bot service"
RUN useradd --system --create-home --home-dir /var/lib/switchboard --uid 10001 switchboard
COPY --from=build /opt/switchboard /opt/switchboard
ENV PATH="/opt/switchboard/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    SWITCHBOARD_DATA_DIR=/var/lib/switchboard/data \
    SWITCHBOARD_METRICS_HOST=0.0.0.0
USER 10001
WORKDIR /var/lib/switchboard
EXPOSE 9100
# Metrics are off unless SWITCHBOARD_METRICS_PORT (9100) and SWITCHBOARD_METRICS_TOKEN are set:
# then alive = /healthz answers; else `switchboard health` (the store and Redis answer).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-m", "bots.healthcheck"]
ENTRYPOINT ["switchboard"]
CMD ["serve"]
