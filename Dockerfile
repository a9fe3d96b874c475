# mockskill as a container: a skill provider for consumers written in any
# language (docker compose, CI service containers, testcontainers).
# User documentation: docs/docker.md. Built and run by tests/test_docker.py.
#
#   docker build -t mockskill .
#   docker run --rm -p 8080:8080 mockskill                       # bundled scenarios
#   docker run --rm -p 8080:8080 -v "$PWD/scenarios:/scenarios:ro" -e MOCKSKILL_WATCH=1 mockskill

ARG BASE_IMAGE=python:3.12-slim

# -- build: install mockskill and its dependencies into a virtual environment
FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY pyproject.toml README.md ./
COPY mockskill/ mockskill/
COPY scenarios/ scenarios/
# With the redis extra (redis-py and hiredis: --state redis://..., docs/scaling.md).
# The venv gets no pip of its own (the base image's pip installs into it), so
# the runtime stage carries only mockskill, its dependencies and their .pyc.
RUN python -m venv --without-pip /opt/mockskill \
 && python -m pip --python /opt/mockskill/bin/python install --no-cache-dir '.[redis]'

# -- runtime: the venv, the bundled scenarios at /scenarios, a non-root user
FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="mockskill" \
      org.opencontainers.image.description="A skill provider scripted by YAML scenarios, for testing consumers of the skill protocol"
COPY --from=build /opt/mockskill /opt/mockskill
# Served unless a folder is mounted over it: mount yours at /scenarios.
COPY scenarios/ /scenarios/
# The official python images ship no .pyc for the standard library, and the
# non-root user cannot write them: every start would compile the modules
# mockskill imports again (about 0.4 s). Importing them once here, as root,
# keeps their bytecode in the image (3 MB); the admin app (Flask), which a
# server builds on its first /__admin request, is built and asked once too.
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin --no-log-init mockskill \
 && /opt/mockskill/bin/python -c "import mockskill.cli, mockskill.server, trustme; mockskill.Server().app.test_client().get('/__admin/health')" \
 && /opt/mockskill/bin/mockskill validate /scenarios
# PYTHONMALLOC: the image serves on the C allocator, which hands back the memory a
# flood of connections took once it is over (docs/docker.md has the figures).
ENV PATH=/opt/mockskill/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONMALLOC=malloc \
    MOCKSKILL_SCENARIOS=/scenarios \
    MOCKSKILL_HOST=0.0.0.0 \
    MOCKSKILL_PORT=8080 \
    MOCKSKILL_INSECURE_ADMIN=1
USER 10001:10001
EXPOSE 8080
# Python's standard library only (the real python:*-slim has no curl). It
# reads the address, port, admin token and TLS from the same variables as serve
# (over TLS it asks without verifying: it checks that the server answers, not who it is).
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-I", "-S", "-c", "import os,ssl,sys,http.client as h;e=os.environ.get;a=e('MOCKSKILL_HOST') or '';a={'':'127.0.0.1','0.0.0.0':'127.0.0.1','::':'::1'}.get(a,a);t=e('MOCKSKILL_ADMIN_TOKEN');p=int(e('MOCKSKILL_PORT') or 8080);s=(e('MOCKSKILL_TLS') or '').lower() in ('1','true','yes','on') or e('MOCKSKILL_TLS_CERT');x=ssl.create_default_context();x.check_hostname=False;x.verify_mode=ssl.CERT_NONE;c=h.HTTPSConnection(a,p,timeout=2,context=x) if s else h.HTTPConnection(a,p,timeout=2);c.request('GET','/__admin/health',headers={'Authorization':'Bearer '+t} if t else {});sys.exit(c.getresponse().status!=200)"]
# Exec form: mockskill is PID 1 and gets SIGTERM itself (it drains the requests in
# flight for up to MOCKSKILL_GRACE seconds, below docker stop's 10; idle, it exits at once).
ENTRYPOINT ["mockskill"]
CMD ["serve"]
