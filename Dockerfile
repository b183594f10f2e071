# dsh serve in a container (RFC 0038): the project mounted at /work, sessions in the /data volume.
#   docker build -t dsh .
#   docker run --rm -v "$PWD:/work" -v dsh-data:/data -e DSH_SERVE_TOKEN=... -p 127.0.0.1:8765:8765 dsh
# Inside the container it listens on all interfaces (the port is published on the host's loopback only above);
# the bearer token is still required. Clients use ws://127.0.0.1:8765/acp and /work as the session's cwd.
FROM python:3.12-slim
RUN apt-get update && apt-get install -y --no-install-recommends git ripgrep && rm -rf /var/lib/apt/lists/*
COPY . /src/dsh
RUN pip install --no-cache-dir /src/dsh && rm -rf /src/dsh
ENV DSH_DATA_DIR=/data XDG_CONFIG_HOME=/data/config
VOLUME ["/data"]
WORKDIR /work
EXPOSE 8765
ENTRYPOINT ["dsh", "serve", "--listen", "0.0.0.0:8765"]
