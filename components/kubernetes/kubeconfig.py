"""Turn an AKS user kubeconfig into one that authenticates without a person at the keyboard.

AKS returns an Entra ID kubeconfig whose exec plugin runs ``kubelogin get-token --login devicecode``, which
waits for a browser and hangs ``pulumi up`` in CI (pulumi-azure-native#2399, #2579). This is what
``kubelogin convert-kubeconfig -l <mode>`` does, done in code so the program needs no kubelogin at plan time.
"""

from __future__ import annotations

from typing import Any

import yaml

from components.vocabulary import LoginMode

AKS_SERVER_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"
"""The Entra ID application every AKS API server accepts tokens for."""


def _flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else None


def kubelogin_kubeconfig(kubeconfig: str, login_mode: LoginMode) -> str:
    """Rewrite every exec user of ``kubeconfig`` to a non-interactive ``kubelogin get-token --login MODE``.

    - ``azurecli``: reuses ``az login`` (a developer, or a CI job after azure/login).
    - ``spn``: ``AZURE_CLIENT_ID``; the secret only ever comes from ``AZURE_CLIENT_SECRET``.
    - ``workloadidentity``: ``AZURE_CLIENT_ID``, ``AZURE_TENANT_ID``, ``AZURE_FEDERATED_TOKEN_FILE`` (GitHub OIDC).
    - ``msi``: the managed identity of the Azure VM that runs ``pulumi up``.
    """
    login_mode = LoginMode(login_mode)
    # libyaml's safe loader where the wheel has it (the same document, faster).
    config: dict[str, Any] = yaml.load(kubeconfig, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 (a safe loader)
    for user in config.get("users") or []:
        exec_ = (user.get("user") or {}).get("exec")
        if not exec_:
            continue  # certificate users (local accounts) need no token
        old = list(exec_.get("args") or [])
        args = ["get-token", "--login", login_mode.value, "--server-id", _flag(old, "--server-id") or AKS_SERVER_ID]
        if env := _flag(old, "--environment"):
            args += ["--environment", env]
        if login_mode in (LoginMode.SPN, LoginMode.WORKLOAD_IDENTITY) and (tenant := _flag(old, "--tenant-id")):
            args += ["--tenant-id", tenant]
        user["user"] = {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "kubelogin",
            "args": args,
            "env": None,
            "installHint": "kubelogin is required: az aks install-cli, or https://azure.github.io/kubelogin",
            "interactiveMode": "Never",
            "provideClusterInfo": False,
        }}
    return yaml.safe_dump(config, sort_keys=False)
