# nats-server built from the Go module pinned in quarry's go.mod
# (github.com/nats-io/nats-server/v2), static, on an empty base.
FROM scratch
COPY rootfs/ /
USER 65532:65532
WORKDIR /data
VOLUME ["/data"]
EXPOSE 4222 6222 8222
ENTRYPOINT ["/nats-server"]
CMD ["--jetstream", "--store_dir", "/data"]
