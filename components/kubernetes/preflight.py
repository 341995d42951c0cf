"""Checks against the cluster's API server before any Kubernetes resource is touched, so that `pulumi up` stops
at once with one line saying what to do instead of failing or timing out per resource:

- ``require_reachable``: a private API server resolves and answers from this machine;
- ``wait_for_access``: the deployer's Azure RBAC role has taken effect. A new role assignment "can take up to
  five minutes to propagate" (AKS, entra-id-authorization); the first `pulumi up` would otherwise get 403 on its
  first namespaces and Helm releases and need a rerun. A preview asks only to read: it writes nothing in the
  cluster, and pulumi-kubernetes previews what it may not dry-run on the server by its own client-side diff;
- ``wait_for_crds``: the AKS add-ons (managed Prometheus, KEDA) have registered the custom resource kinds the
  program writes. The add-ons install them after the cluster reports success; an object written before gets
  "no matches for kind" and the first `pulumi up` fails. Not in a preview, which writes no object (and whose
  identity may not read CustomResourceDefinitions).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

import pulumi
import yaml

HINT = ("run `pulumi up` where the VNet is reachable: a VM or self-hosted runner in the cluster's VNet, or in a "
        "peered VNet linked to the cluster's private DNS zone (docs/deploying.md: Private clusters)")
ACCESS_TIMEOUT_SECONDS = 600
"""Twice the five minutes AKS documents for a role assignment to propagate."""
ACCESS_POLL_SECONDS = 15
DEPLOY_ACCESS = {"verb": "*", "group": "*", "resource": "*"}
"""May I do everything? What `pulumi up` needs: namespaces, CRDs, cluster-scoped rules, Helm releases."""
PREVIEW_ACCESS = {"verb": "list", "group": "", "resource": "namespaces"}
"""May I read? What `pulumi preview` needs. A preview writes nothing in the cluster: pulumi-kubernetes previews a
create or update by server-side dry run, which Kubernetes authorizes as the write itself, and where that is
Forbidden by a client-side diff of the inputs (pulumi-kubernetes provider/pkg/provider/provider.go, Create and
Update: "defaulting to client-side"). Azure Kubernetes Service RBAC Reader, the workflows' preview app's role,
allows it (Microsoft.ContainerService/managedClusters/namespaces/read)."""


def access_review(attributes: Mapping[str, str]) -> dict[str, Any]:
    """A SelfSubjectAccessReview of ``attributes`` (authorization.k8s.io/v1)."""
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": dict(attributes)}}


def api_server_problem(host: str, port: int = 443, timeout: float = 5.0) -> str | None:
    """Why ``host:port`` cannot be reached from here, or None when a TCP connection opens."""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return f"{host} does not resolve here; a private cluster's name exists only in its VNet's private DNS zone"
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as error:
        return f"{host}:{port} resolves but does not answer ({error})"


def _cluster(kubeconfig: str) -> dict[str, Any]:
    return yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]


def server_of(kubeconfig: str) -> tuple[str, int]:
    """Host and port of the kubeconfig's (first) cluster."""
    url = urlparse(_cluster(kubeconfig)["server"])
    return url.hostname or "", url.port or 443


def require_reachable(kubeconfig: str) -> str:
    """The kubeconfig unchanged, or a one-line error naming the problem and the fix."""
    problem = api_server_problem(*server_of(kubeconfig))
    if problem:
        raise pulumi.RunError(f"private AKS API server unreachable from this machine: {problem}; {HINT}")
    return kubeconfig


def exec_token(kubeconfig: str) -> str | None:
    """A bearer token from the kubeconfig's exec plugin (kubelogin), or None for a certificate user."""
    user = yaml.safe_load(kubeconfig)["users"][0]["user"]
    plugin = user.get("exec")
    if not plugin:
        return None
    env = {**os.environ, **{e["name"]: e["value"] for e in plugin.get("env") or []}}
    try:
        result = subprocess.run([plugin["command"], *plugin.get("args", [])], capture_output=True, text=True,
                                env=env, timeout=120, check=False)
    except FileNotFoundError:
        raise pulumi.RunError(f"{plugin['command']} not found: {plugin.get('installHint') or 'install it'}") from None
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise pulumi.RunError(f"{plugin['command']} could not get a token for the cluster: {last}")
    return json.loads(result.stdout)["status"]["token"]


def _call(kubeconfig: str, token: str | None, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One API call to the kubeconfig's server, trusting its CA, as ``token``: a POST of ``body``, else a GET.
    Raises ``urllib.error.HTTPError`` on an error status."""
    cluster = _cluster(kubeconfig)
    context = ssl.create_default_context(
        cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        if cluster.get("certificate-authority-data") else None)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(f"{cluster['server'].rstrip('/')}{path}", headers=headers,
                                     data=None if body is None else json.dumps(body).encode(),
                                     method="GET" if body is None else "POST")
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        return json.loads(response.read())


def may(kubeconfig: str, token: str, attributes: Mapping[str, str] = DEPLOY_ACCESS) -> bool:
    """Whether the API server answers a SelfSubjectAccessReview of ``attributes`` with allowed."""
    try:
        review = _call(kubeconfig, token, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                       access_review(attributes))
    except urllib.error.HTTPError as error:
        if error.code in (401, 403):
            return False
        raise
    return bool(review["status"].get("allowed"))


CRD_TIMEOUT_SECONDS = 600
"""Add-ons deploy within minutes of the cluster; ten minutes is generous."""


def crd_established(kubeconfig: str, token: str | None, name: str) -> bool:
    """Whether the API server serves the CustomResourceDefinition ``name`` (condition Established)."""
    try:
        crd = _call(kubeconfig, token, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return False
        raise
    conditions = crd.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def wait_for_crds(kubeconfig: str, names: Sequence[str], timeout: float = CRD_TIMEOUT_SECONDS,
                  interval: float = ACCESS_POLL_SECONDS, token: Callable[[str], str | None] = exec_token,
                  established: Callable[[str, str | None, str], bool] = crd_established,
                  sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> str:
    """The kubeconfig unchanged once every CRD in ``names`` is served; one line naming the missing ones after
    ``timeout`` seconds."""
    if not names:
        return kubeconfig
    bearer = token(kubeconfig)
    deadline = clock() + timeout
    while missing := [n for n in names if not established(kubeconfig, bearer, n)]:
        if clock() >= deadline:
            raise pulumi.RunError(
                f"the cluster still does not serve {', '.join(missing)} after {timeout:.0f}s: the AKS add-on that "
                "installs it (managed Prometheus for azmonitoring.coreos.com, KEDA for keda.sh) is not running; "
                "check `az aks show --query '[azureMonitorProfile, workloadAutoScalerProfile]'` and kube-system pods")
        pulumi.log.info(f"waiting for the AKS add-ons to register {', '.join(missing)}")
        sleep(interval)
    return kubeconfig


def wait_for_access(kubeconfig: str, preview: bool = False, timeout: float = ACCESS_TIMEOUT_SECONDS,
                    interval: float = ACCESS_POLL_SECONDS, token: Callable[[str], str | None] = exec_token,
                    allowed: Callable[[str, str, Mapping[str, str]], bool] = may,
                    sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> str:
    """The kubeconfig unchanged once its identity may do what the run needs: manage every Kubernetes object for
    `pulumi up`, read them for a preview (``preview``, ``pulumi.runtime.is_dry_run()``: ``PREVIEW_ACCESS`` says
    why reading is all a preview needs). Polls while a fresh role assignment propagates, and stops with one line
    after ``timeout`` seconds."""
    bearer = token(kubeconfig)
    if bearer is None:
        return kubeconfig  # a certificate (local admin) user: no Azure RBAC to wait for
    attributes = PREVIEW_ACCESS if preview else DEPLOY_ACCESS
    deadline = clock() + timeout
    while not allowed(kubeconfig, bearer, attributes):
        if clock() >= deadline:
            if preview:
                raise pulumi.RunError(
                    f"the identity running pulumi preview still may not read Kubernetes objects after "
                    f"{timeout:.0f}s: give it Azure Kubernetes Service RBAC Reader on the cluster (the workflows' "
                    "preview app gets it from python -m ops ci-setup), or preview as the deployer")
            raise pulumi.RunError(
                f"the identity running pulumi up still may not manage Kubernetes objects after {timeout:.0f}s: keep "
                "cluster.grantDeployerAdmin on (AKS RBAC Cluster Admin), or add the identity to a group in "
                "cluster.adminGroupObjectIds, and check cluster.deployerPrincipalType")
        pulumi.log.info("waiting for the Kubernetes role assignment to take effect (up to 5 minutes, AKS docs)")
        sleep(interval)
    return kubeconfig
