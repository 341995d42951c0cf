"""A new environment: a stack file for an existing scenario, made from one that runs it, checked like any stack
file, with the generated docs brought up to date (``python -m offline new-stack NAME --like STACK``)."""

from __future__ import annotations

import argparse
import difflib
import ipaddress
import json
import re
import shlex
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from offline.cli import error
from offline.stack_files import REPO_ROOT, read_yaml, stack_config, stack_files
from program.config.errors import ConfigError
from program.config.keys import PROJECT
from program.config.rules import between_stacks

if TYPE_CHECKING:
    from program.config.schema import StackConfig

SETTINGS = ("nameRoot", "owner", "lifetime")
"""What a new environment usually changes first; anything else is edited in the file afterwards."""


def _set(text: str, key: str, value: str) -> str:
    """``text`` with ``PROJECT:key`` set to ``value``: its line replaced, or one added under ``config:``."""
    line = f"  {PROJECT}:{key}: {json.dumps(value)}"  # quoted: a '#' or ': ' in a value stays in it
    pattern = re.compile(rf"^  {PROJECT}:{key}:.*$", re.MULTILINE)
    if pattern.search(text):
        return pattern.sub(line, text, count=1)
    return re.sub(r"^config:\n", f"config:\n{line}\n", text, count=1, flags=re.MULTILINE)


NETWORK_KEYS = ("addressSpace", "nodeSubnet", "endpointSubnet")
"""What moves with a private stack's address space."""


def _set_network(text: str, values: dict[str, str], old_space: str) -> str:
    """``text`` with ``PROJECT:network``'s ``values`` set (lines replaced or added under it, the section added under
    ``config:`` if missing) and the old address space in its comments replaced too (they name it)."""
    head = re.compile(rf"^  {PROJECT}:network:[ \t]*\n", re.MULTILINE)
    if not head.search(text):
        text = re.sub(r"^config:\n", f"config:\n  {PROJECT}:network:\n", text, count=1, flags=re.MULTILINE)
    start = head.search(text).end()  # type: ignore[union-attr]
    end = next((m.start() for m in re.finditer(r"^  \S.*$", text[start:], re.MULTILINE)), len(text) - start) + start
    block = text[start:end]
    for key, value in values.items():
        line = re.compile(rf"^    {key}:.*$", re.MULTILINE)
        set_line = f"    {key}: {value}"
        block = line.sub(set_line, block, count=1) if line.search(block) else f"{set_line}\n{block}"
    block = "\n".join(b.replace(old_space, values["addressSpace"]) if b.lstrip().startswith("#") else b
                      for b in block.split("\n"))
    return text[:start] + block + text[end:]


def _moved(subnet: str, old: ipaddress.IPv4Network, new: ipaddress.IPv4Network) -> str:
    """``subnet`` at the same offset in ``new`` as it had in ``old``."""
    net = ipaddress.IPv4Network(subnet)
    moved = ipaddress.IPv4Network((int(new.network_address) + int(net.network_address) - int(old.network_address),
                                   net.prefixlen))
    if not moved.subnet_of(new):
        raise ValueError(f"address space {new} is too small for the copied subnet {subnet} (a /{old.prefixlen} "
                         "holds it)")
    return str(moved)


AZURE_DEFAULT_SPACE = ipaddress.IPv4Network("10.0.0.0/16")
"""The address space a VNet gets when none is given (the Azure CLI's ``az network vnet create``: "Default:
10.0.0.0/16", Azure/azure-cli src/azure-cli/azure/cli/command_modules/network/aaz/latest/network/vnet/_create.py):
the likeliest runner VNet's, so never picked for a copy, whose VNet peers the runner's."""


def private_network(like: StackConfig, taken: dict[str, str], wanted: str | None) -> dict[str, str] | None:
    """A private stack's network keys for its copy: ``wanted`` (``--address-space``) or else the first /N of
    10.0.0.0/8 that no stack file uses, that is not the runner VNet's (``network.runnerAddressSpaces`` of the copied
    stack) nor Azure's default VNet space, with the subnets moved along. A private stack peers its VNet with the
    runner's, and Azure peers one VNet only with address spaces that do not overlap (round-4 Azure audit #7; issue
    33c audit #9: the first free one was 10.0.0.0/16); ``taken`` is stack → address space of every stack file. None
    for a stack that is not private: its VNet is peered with nothing, so its copy keeps the address space."""
    if not like.private_endpoints_or_api_server:
        return None
    old = ipaddress.IPv4Network(like.network.address_space)
    used = [*((f"stack {stack}", ipaddress.IPv4Network(space)) for stack, space in sorted(taken.items())),
            *(("the runner VNet (network.runnerAddressSpaces)", ipaddress.IPv4Network(space))
              for space in like.network.runner_address_spaces)]
    avoid = [*(space for _, space in used), AZURE_DEFAULT_SPACE]
    if wanted is not None:
        new = ipaddress.IPv4Network(wanted)
        if clash := next(((whose, space) for whose, space in used if space.overlaps(new)), None):
            raise ValueError(f"--address-space {new} overlaps {clash[1]} of {clash[0]}: a private stack's VNet peers "
                             f"the runner's, which takes no two overlapping spaces; free: "
                             f"{_free(avoid, old.prefixlen)}")
    else:
        new = _free(avoid, old.prefixlen)
    return {"addressSpace": str(new), "nodeSubnet": _moved(like.network.node_subnet, old, new),
            "endpointSubnet": _moved(like.network.endpoint_subnet, old, new)}


def _free(used: Iterable[ipaddress.IPv4Network], prefix: int) -> ipaddress.IPv4Network:
    """The first /``prefix`` of 10.0.0.0/8 that overlaps none of ``used``."""
    used = list(used)
    for candidate in ipaddress.IPv4Network("10.0.0.0/8").subnets(new_prefix=max(prefix, 8)):
        if not any(candidate.overlaps(u) for u in used):
            return candidate
    raise ValueError(f"no free /{prefix} left in 10.0.0.0/8; pass --address-space")


def runner_space_unknown(like: StackConfig) -> str | None:
    """What to check when the copied stack peers a runner VNet whose address space its file does not give: the
    copy's space was picked around the stack files' and Azure's default only."""
    n = like.network
    if not like.private_endpoints_or_api_server or n.runner_address_spaces:
        return None
    runner = f"az network vnet show --ids {n.runner_vnet_id}" if n.runner_vnet_id else \
        "az network vnet show --ids <runner VNet id>"
    return (f"the runner VNet's address space is not in the copied file (network.runnerAddressSpaces): check the "
            f"picked one against {runner} --query addressSpace.addressPrefixes, and set network.runnerAddressSpaces "
            "so config checks it")


def new_stack_file(name: str, like: str, settings: dict[str, str], root: Path = REPO_ROOT,
                   network: dict[str, str] | None = None) -> Path:
    """Write ``Pulumi.<name>.yaml`` from ``like``'s file with ``settings`` (SETTINGS keys) and ``network`` (keys of
    ``PROJECT:network``) set, and check it, alone and beside the other stack files; a file that does not load is
    removed again and its error raised."""
    files = stack_files(root)
    target = root / f"Pulumi.{name}.yaml"
    if target.exists():
        raise ValueError(f"{target.name} already exists")
    if like not in files:
        close = difflib.get_close_matches(like, files, n=1)
        raise ValueError(f"no stack {like!r} to start from{f'; did you mean {close[0]}?' if close else ''} "
                         f"stacks: {', '.join(sorted(files))}")
    text = files[like].read_text()
    scenario = read_yaml(files[like])["config"].get(f"{PROJECT}:scenario", like)
    schema, _, rest = text.partition("\n") if text.startswith("# yaml-language-server") else ("", "", text)
    note = f"# {name}: an environment of scenario {scenario}, from Pulumi.{like}.yaml (python -m offline new-stack)."
    text = "\n".join(filter(None, [schema, note, rest]))
    for key, value in settings.items():
        text = _set(text, key, value)
    if network:
        text = _set_network(text, network, str(stack_config(like, files[like]).network.address_space))
    target.write_text(text)
    try:
        cfg = stack_config(name, target)
        others = {s: c for s, p in sorted(files.items()) if (c := _loads(s, p)) is not None}
        if beside := [c.error for c in between_stacks({**others, name: cfg}, new={name}) if name in c.stacks]:
            raise ConfigError.several(beside)
    except ConfigError:
        target.unlink()
        raise
    return target


def _loads(stack: str, path: Path) -> StackConfig | None:
    """A stack file's config, or None where it does not load (its own error is its own render's to report)."""
    try:
        return stack_config(stack, path)
    except ConfigError:
        return None


ASKED = (("owner", "owner", "the team the stack's resources are tagged to"),
         ("lifetime", "lifetime", "demo (destroyed by the hourly expiry after its ttlHours) or long-lived"))
"""What a new environment must decide rather than inherit: (flag, key, what it means)."""


def asked_settings(args: argparse.Namespace, like: StackConfig, ask: Callable[[str], str] | None
                   ) -> dict[str, str]:
    """``--owner`` and ``--lifetime``, else asked (``ask``: a terminal's input, the copied stack's value as the
    default), else an error: a new environment does not silently inherit another team's owner or a long-lived
    lifetime (newcomer #12)."""
    inherited = {"owner": like.owner, "lifetime": like.lifetime.value}
    settings, missing = {}, []
    for flag, key, meaning in ASKED:
        value = getattr(args, flag)
        if value is None and ask is not None:
            value = ask(f"{key} ({meaning}) [{inherited[key]}]: ").strip() or inherited[key]
        if value is None:
            missing.append(f"--{flag}")
        else:
            settings[key] = value
    if missing:
        raise ValueError(f"{' and '.join(missing)} needed (not asked: no terminal); "
                         f"{args.like} has owner {inherited['owner']}, lifetime {inherited['lifetime']}")
    if settings["lifetime"] not in ("demo", "long-lived"):
        raise ValueError(f"lifetime {settings['lifetime']!r}: demo or long-lived")
    return settings


def copied(cfg: StackConfig, like: str) -> str:
    """What the new stack took from ``like``'s file, in one line to review."""
    pools = "; ".join(f"{g.name} {g.vm_size}{' spot' if g.spot else ''} {g.min_count}–{g.max_count}"
                      for g in cfg.gpu_pools)
    network = f", address space {cfg.network.address_space}" if cfg.private_endpoints_or_api_server else ""
    return (f"copied from Pulumi.{like}.yaml: scenario {cfg.scenario}, region {cfg.location}, "
            f"GPU pools {pools or 'none'}; set: owner {cfg.owner}, lifetime {cfg.lifetime.value}, "
            f"naming root {cfg.naming.root}{network}")


def asked_network(args: argparse.Namespace, like: StackConfig, taken: dict[str, str],
                  ask: Callable[[str], str] | None) -> dict[str, str] | None:
    """``--address-space``, else asked in a terminal (a free one as the default), else a free one: a private stack
    never keeps the address space of the stack it copies (``private_network``)."""
    wanted = args.address_space
    if wanted is None and ask is not None and (free := private_network(like, taken, None)):
        runner = ", ".join(like.network.runner_address_spaces) or "not in its file: not checked"
        wanted = ask(f"address space (its VNet peers the runner's, which takes no two overlapping spaces; "
                     f"{args.like} has {like.network.address_space}, the runner {runner}) "
                     f"[{free['addressSpace']}]: ").strip() or None
    return private_network(like, taken, wanted)


def new_stack_command(args: argparse.Namespace) -> int:
    from offline.docs import write_docs
    files = stack_files()
    like = stack_config(args.like) if args.like in files else None
    try:
        ask = input if sys.stdin.isatty() else None
        asked = asked_settings(args, like, ask) if like else {}
        settings = {**({"nameRoot": args.name_root} if args.name_root else {}), **asked}
        taken = {s: c.network.address_space for s, p in files.items() if (c := _loads(s, p)) is not None}
        network = asked_network(args, like, taken, ask) if like else None
        path = new_stack_file(args.name, args.like, settings, network=network)
    except ValueError as e:
        return error(str(e))
    print(copied(stack_config(args.name, path), args.like))
    if like is not None and network is not None and args.address_space is None and \
            (check := runner_space_unknown(like)):
        print(f"warning: {check}", file=sys.stderr)
    updated = write_docs()
    print(f"wrote {path.name}; regenerated {', '.join(map(str, updated)) or 'no docs (none changed)'}")
    print(f"next: review and commit them; deploy with `pulumi stack select --create --stack={shlex.quote(args.name)}` "
          "and `pulumi up "
          f"--policy-pack policy`, or the deploy workflow with stack {args.name}, whose environment needs its "
          "federated credential (.venv/bin/python -m ops ci-setup prints it)")
    return 0
