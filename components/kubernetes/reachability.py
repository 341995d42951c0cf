"""Can this machine reach a private cluster's API server? Asked before any Kubernetes call, so that a
`pulumi up` from outside the VNet stops at once with what to do, instead of timing out per resource.
"""

from __future__ import annotations

import socket
from urllib.parse import urlparse

import pulumi
import yaml

HINT = ("run `pulumi up` where the VNet is reachable: a VM or self-hosted runner in the cluster's VNet or a "
        "peered one (README: Private clusters)")


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


def server_of(kubeconfig: str) -> tuple[str, int]:
    """Host and port of the kubeconfig's (first) cluster."""
    url = urlparse(yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]["server"])
    return url.hostname or "", url.port or 443


def require_reachable(kubeconfig: str) -> str:
    """The kubeconfig unchanged, or a one-line error naming the problem and the fix."""
    problem = api_server_problem(*server_of(kubeconfig))
    if problem:
        raise pulumi.RunError(f"private AKS API server unreachable from this machine: {problem}; {HINT}")
    return kubeconfig
