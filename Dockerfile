# One image for every process of the Procfile: web, worker, beat and the release step
# (docs/operating.md, "Containers"). Build: `docker build -t hitl-mcp .`
#
# The base is any image with Python 3.11 and its venv module at python3; the usual public one by
# default. `make container-test` builds on one made from Debian's own packages instead.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# A CA bundle for pip behind a proxy that intercepts TLS (mounted into the build); unset, pip's own.
ARG PIP_CERT
# The locked releases (requirements.txt, from `make lock`) into a virtualenv that the final stage
# copies whole: no pip cache, wheels or build files reach the image. Every dependency ships wheels
# for Linux and CPython 3.11, so no compiler is needed. Their bytecode is compiled here: the
# processes run with PYTHONDONTWRITEBYTECODE (a read-only file system), and compiling LangChain's
# and Django's modules at every start made each process start seconds slower.
RUN python3 -m venv /opt/venv
COPY requirements.txt /tmp/requirements.txt
RUN /opt/venv/bin/pip install -r /tmp/requirements.txt
COPY . /app
# The admin's and the API docs' files, collected into the image. A throw-away key and data
# directory: nothing of the build's settings stays behind.
RUN cd /app && SECRET_KEY=collectstatic-only HITL_VAR_DIR=/tmp/build-var STATIC_ROOT=/app/static \
    /opt/venv/bin/python manage.py collectstatic --noinput --verbosity 0 \
    && rm -rf /tmp/build-var && /opt/venv/bin/python -m compileall -q /app

FROM ${PYTHON_IMAGE}
# A user of its own, by number, so that Kubernetes' runAsNonRoot can check it. HITL_VAR_DIR (beat's
# schedule state, METRICS_DIR) is its one writable directory; the code and the static files are
# root's and read-only to it.
RUN groupadd --gid 10001 hitl \
    && useradd --uid 10001 --gid hitl --home-dir /var/lib/hitl --no-create-home --shell /usr/sbin/nologin hitl \
    && install -d -o 10001 -g 10001 /var/lib/hitl /var/lib/hitl/metrics
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
WORKDIR /app
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/app \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HITL_VAR_DIR=/var/lib/hitl \
    STATIC_ROOT=/app/static \
    PORT=8000
USER 10001:10001
EXPOSE 8000
# Celery's warm shutdown and uvicorn's graceful one both start on SIGTERM. A worker then lets its
# runs finish for WORKER_STOP_GRACE_SECONDS (20) and hands the rest back: give the container a stop
# timeout above that and above RUN_LEASE_SECONDS (30), e.g. `docker stop -t 60`, compose's
# stop_grace_period or Kubernetes' terminationGracePeriodSeconds (deploy/).
STOPSIGNAL SIGTERM
# By the process the container runs: the web's /health/, a worker's ping over the broker; beat and
# the release step are healthy while they run.
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 CMD ["python", "deploy/healthcheck.py"]
# The Procfile's web; the worker, beat and the release step are the same image with another
# command (deploy/compose.yaml).
CMD ["sh", "-c", "exec uvicorn hitl_project.asgi:application --http hitl_project.http:NoDelayHttpToolsProtocol --host 0.0.0.0 --port ${PORT} --workers ${WEB_CONCURRENCY:-2} --log-config hitl_project/uvicorn-logging.json"]
