# syntax=docker/dockerfile:1
# pve-steward as a container image. MCP over stdio by default:
#   docker run -i --rm -e PVE_STEWARD_URL=... -e PVE_STEWARD_TOKEN_ID=... -e PVE_STEWARD_TOKEN_SECRET=... pve-steward
# Streamable HTTP with PVE_STEWARD_TRANSPORT=http (binding 0.0.0.0 requires a bearer token; see README).
# Nothing secret is baked in: the PVE token and the bearer token are given at run time.
#
# The base is pinned by digest: the multi-platform index of python:3.12-slim-bookworm (Python 3.12.14, built
# 2026-08-25, as docker-library/repo-info records it in repos/python/remote/3.12-slim-bookworm.md). Both stages
# name the same digest. Refreshed by Dependabot (.github/dependabot.yml) or by hand (docs/releasing.md):
#   docker buildx imagetools inspect python:3.12-slim-bookworm --format '{{json .Manifest.Digest}}'
# and the release workflow refuses to build from a digest the registry no longer serves.

# --- build: the package and its dependencies into a virtual environment (build tools stay here)
FROM python:3.12-slim-bookworm@sha256:0f5b26b9518d002b6173fd61daad821fa340635ebfec5bba471013f9ca114579 AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# WHEEL: a wheel in dist/ to install instead of building from the sources; the release workflow passes the
# wheel it built and tested, so the image runs the same files as PyPI's. `make image` builds from the sources.
ARG WHEEL=""
COPY pyproject.toml README.md dist/*.whl ./
COPY src ./src
RUN python -m venv --without-pip /opt/pve-steward \
 && python -m pip --python /opt/pve-steward/bin/python install "./${WHEEL:-.}" \
 && /opt/pve-steward/bin/pve-steward --version

# --- runtime: the same slim base, the environment, a non-root user
FROM python:3.12-slim-bookworm@sha256:0f5b26b9518d002b6173fd61daad821fa340635ebfec5bba471013f9ca114579
LABEL io.modelcontextprotocol.server.name="io.github.pve-steward/pve-steward" \
      org.opencontainers.image.title="pve-steward" \
      org.opencontainers.image.description="MCP server that operates Proxmox VE like a careful senior operator" \
      org.opencontainers.image.source="https://github.com/pve-steward/pve-steward" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 steward \
 && useradd --system --uid 10001 --gid steward --home-dir /home/steward --create-home --shell /usr/sbin/nologin steward \
 && mkdir -p /home/steward/.local/state/pve-steward /home/steward/.config/pve-steward \
 && chown -R steward:steward /home/steward
COPY --from=build /opt/pve-steward /opt/pve-steward
COPY scripts/container_healthcheck.py /usr/local/lib/pve-steward-healthcheck.py
ENV PATH=/opt/pve-steward/bin:$PATH \
    HOME=/home/steward \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PVE_STEWARD_HTTP_PORT=8765
USER 10001:10001
WORKDIR /home/steward
EXPOSE 8765
# Probes GET /health when the server speaks HTTP, reading the server's command line, environment and TOML file
# with the server's own code; passes over stdio, where there is no port.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "/usr/local/lib/pve-steward-healthcheck.py"]
ENTRYPOINT ["pve-steward"]
