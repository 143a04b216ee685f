# quarry: one static binary (CGO_ENABLED=0) on an empty base. Built by
# scripts/images.sh from a context it prepares (bin/images/quarry); nothing
# is pulled.
FROM scratch
COPY rootfs/ /
USER 65532:65532
WORKDIR /data
ENTRYPOINT ["/quarry"]
CMD ["help"]
