# The node-maintenance operator image: a static binary on a distroless base,
# running as an unprivileged user. `make image` builds it with the tag the
# provider deploys by default (config.DefaultImage).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w" \
    -o /out/node-maintenance-operator ./operator/cmd/node-maintenance-operator

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/node-maintenance-operator /node-maintenance-operator
USER 65532:65532
ENTRYPOINT ["/node-maintenance-operator"]
