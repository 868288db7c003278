# art serve as a container image: a static, pure-Go binary (no cgo) on an
# empty base, run as an unprivileged user, with the store (checkpoints,
# history, trajectories) in the /data volume.
#
#   docker build -t art .
#   docker run -p 7999:7999 -v art-data:/data -v "$PWD/Qwen2.5-0.5B-Instruct:/models/base:ro" \
#     -e ART_API_KEY=secret art --base-model /models/base --name agent --project demo
#
# Arguments after the image name are added to `art serve`; the entry point
# already sets --data /data and --addr 0.0.0.0:7999.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -ldflags="-s -w" -o /out/art ./cmd/art
RUN mkdir -p /out/data

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/art /usr/local/bin/art
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV HOME=/data
WORKDIR /data
VOLUME /data
EXPOSE 7999
ENTRYPOINT ["/usr/local/bin/art", "serve", "--data", "/data", "--addr", "0.0.0.0:7999"]
