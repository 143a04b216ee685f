# The MinIO server built from its Go module (pinned in scripts/build-minio.sh),
# static, on an empty base.
FROM scratch
COPY rootfs/ /
USER 65532:65532
WORKDIR /data
VOLUME ["/data"]
EXPOSE 9000 9001
ENV MINIO_BROWSER=off
ENTRYPOINT ["/minio"]
CMD ["server", "/data", "--address", ":9000", "--console-address", ":9001"]
