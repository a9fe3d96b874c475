"""The Kubernetes example (examples/k8s/): valid against Kubernetes' own schemas, and consistent.

Validated offline with ``kubernetes-validate`` (from the test extras), which
ships the OpenAPI schemas of every Kubernetes release as JSON Schema: strict,
so an unknown or misplaced field fails as ``kubectl apply`` would refuse it.
(``kubectl --dry-run=client`` would need a cluster for its schemas; a
cluster is not at hand in CI.) Then what the schemas cannot say: the pieces
name each other right, the probe is the image's health check, the scenarios
in the ConfigMap load.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from mockskill import load_text

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "examples" / "k8s"
VERSIONS = ["1.28.0", "1.30.0", kubernetes_validate.latest_version()]


def documents() -> list[dict[str, Any]]:
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        found += [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    return found


def one(kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


@pytest.mark.parametrize("version", VERSIONS)
def test_every_resource_is_valid_against_the_kubernetes_schema(version: str) -> None:
    kinds = []
    for document in documents():
        kubernetes_validate.validate(document, version, strict=True)  # raises if not
        kinds.append(f"{document['kind']}/{document['metadata']['name']}")
    assert sorted(kinds) == [
        "ConfigMap/mockskill-scenarios",
        "Deployment/mockskill",
        "Deployment/redis",
        "Secret/mockskill-admin",
        "Service/mockskill",
        "Service/redis",
    ]


def test_the_validation_would_catch_a_mistake() -> None:
    deployment = one("Deployment", "mockskill")
    mistaken = json.loads(json.dumps(deployment))
    mistaken["spec"]["replica"] = mistaken["spec"].pop("replicas")  # a typo kubectl refuses
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(mistaken, VERSIONS[-1], strict=True)


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    (found,) = deployment["spec"]["template"]["spec"]["containers"]
    result: dict[str, Any] = found
    return result


def test_three_replicas_share_the_redis_of_the_example() -> None:
    deployment = one("Deployment", "mockskill")
    assert deployment["spec"]["replicas"] == 3
    env = {e["name"]: e for e in container(deployment)["env"]}
    state = env["MOCKSKILL_STATE"]["value"]
    redis = one("Service", "redis")
    assert state == f"redis://{redis['metadata']['name']}:{redis['spec']['ports'][0]['port']}/0"
    assert env["MOCKSKILL_HOST"]["value"] == "0.0.0.0"
    secret = env["MOCKSKILL_ADMIN_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert secret["key"] in one("Secret", secret["name"])["stringData"]
    redis_pods = one("Deployment", "redis")["spec"]["template"]["metadata"]["labels"]
    assert redis["spec"]["selector"].items() <= redis_pods.items()


def test_the_service_selects_the_pods_and_the_port_they_listen_on() -> None:
    deployment = one("Deployment", "mockskill")
    service = one("Service", "mockskill")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ports = {p["name"]: p["containerPort"] for p in container(deployment)["ports"]}
    (port,) = service["spec"]["ports"]
    env = {e["name"]: e.get("value") for e in container(deployment)["env"]}
    assert ports[port["targetPort"]] == int(env["MOCKSKILL_PORT"])


def test_readiness_is_the_images_own_health_check_of_admin_health() -> None:
    probe = container(one("Deployment", "mockskill"))["readinessProbe"]["exec"]["command"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    healthcheck = re.search(r"^  CMD (\[.*\])$", dockerfile, re.MULTILINE)
    assert healthcheck is not None
    assert probe == json.loads(healthcheck.group(1))
    assert "/__admin/health" in probe[-1]
    assert "MOCKSKILL_ADMIN_TOKEN" in probe[-1]


def test_the_configmap_holds_valid_scenarios_where_the_pods_read_them() -> None:
    deployment = one("Deployment", "mockskill")
    (volume,) = deployment["spec"]["template"]["spec"]["volumes"]
    configmap = one("ConfigMap", volume["configMap"]["name"])
    (mount,) = container(deployment)["volumeMounts"]
    assert mount["name"] == volume["name"]
    assert mount["mountPath"] == "/scenarios"  # the image's MOCKSKILL_SCENARIOS
    for name, text in configmap["data"].items():
        assert name.endswith(".yaml")
        scenarios = load_text(text)
        assert [s.name for s in scenarios.scenarios] == ["fleet"]
