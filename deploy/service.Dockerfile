# The service's own container image, for running Genesis as a container of
# the Docker engine it drives (Docker Desktop on macOS and Windows):
# docs/docker-desktop.md. From the repository's root:
#   docker build -f deploy/service.Dockerfile -t genesis/sandbox-service .
# It pulls golang, node and debian:bookworm-slim from Docker Hub. On a Linux
# host, `make service-image` builds the same image without any registry: the
# base from images/service with debootstrap, plus the same static binaries.
# The final stage's packages, labels, volume, port, entry point and command
# must stay those of images/service/recipe.json and serviceImageConfig in
# cmd/sandbox-service (TestServiceDockerfile checks it).
FROM node:20-bookworm-slim AS console
WORKDIR /src/console
COPY console/package.json console/package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=warn
COPY console/ ./
RUN npm run --silent build

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
COPY --from=console /src/internal/console/dist/ internal/console/dist/
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/ \
	./cmd/sandbox-service ./cmd/genesis ./cmd/genesis-agent ./cmd/genesis-egress

FROM debian:bookworm-slim
RUN apt-get update \
	&& apt-get install -y --no-install-recommends debootstrap e2fsprogs ca-certificates tini \
	&& rm -rf /var/lib/apt/lists/* \
	&& mkdir -p /var/lib/genesis /etc/genesis
COPY --from=build /out/ /usr/local/bin/
ENV LANG=C.UTF-8
LABEL dev.genesis.managed=false dev.genesis.purpose=service
EXPOSE 8080/tcp
VOLUME /var/lib/genesis
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/sandbox-service"]
CMD ["serve", "--addr", "0.0.0.0:8080", "--data-dir", "/var/lib/genesis"]
