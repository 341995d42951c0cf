"""python -m offline COMMAND: the offline tools (render, docs, a new stack, the CI setup), which need no cloud, Pulumi
CLI or credentials, and the workflows' helpers, of which those that ask Azure or a cluster say so in their help.

Each command is one row of COMMANDS: its help, its arguments and the function that runs it. Each imports only what
it uses, so the lifecycle helpers that read config never run the Pulumi program.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aksgpu.config.errors import ConfigError
from aksgpu.config.types import PROJECT


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _unknown_stack(stack: str) -> str | None:
    from offline.stack_files import stack_files
    return None if stack in stack_files() else f"no config file for stack {stack!r} (expected Pulumi.{stack}.yaml)"


def _render(args: argparse.Namespace) -> int:
    if args.all and args.config:
        return _error("--config goes with --stack")
    from offline.render_cli import render
    return render(args.stack, args.config, args.out)


def _docs(args: argparse.Namespace) -> int:
    from offline.docs import write_docs
    stale = write_docs(check=args.check)
    for path in stale:
        print(f"{'stale' if args.check else 'wrote'}: {path}", file=sys.stderr if args.check else sys.stdout)
    return 1 if args.check and stale else 0


def _stacks(args: argparse.Namespace) -> int:
    from offline.stack_files import stack_files
    if args.check is not None:
        return 0 if args.check in stack_files() else _error(
            f"no stack {args.check!r}; stacks: {', '.join(stack_files())}")
    print(json.dumps(sorted(stack_files())))
    return 0


def _matrix(args: argparse.Namespace) -> int:
    from offline.runners import matrix
    names = [n for arg in args.stacks for n in (json.loads(arg) if arg.startswith("[") else [arg])]
    if problems := [p for n in names if (p := _unknown_stack(n))]:
        return _error(problems[0])
    print(json.dumps(matrix(names)))
    return 0


def _lifetime(args: argparse.Namespace) -> int:
    if problem := _unknown_stack(args.stack):
        return _error(problem)
    from offline.stack_files import stack_config
    print(stack_config(args.stack).lifetime.value)
    return 0


def _leftovers(args: argparse.Namespace) -> int:
    if problem := _unknown_stack(args.stack):
        return _error(problem)
    from offline.lifecycle import deployed, remains, retain
    from offline.stack_files import stack_config
    found = remains(deployed(stack_config(args.stack)))
    for item in found.kept:
        print(f"kept after destroy of {args.stack}: {item}")
    if args.retain and found.kept_group and not found.leftovers:
        retain(found.kept_group)
        print(f"marked resource group {found.kept_group} lifetime: retained (no expiry; a push does not redeploy it)")
    for item in found.leftovers:
        print(f"LEFT OVER after destroy of {args.stack}: {item}", file=sys.stderr)
    if not found.leftovers and not found.kept:
        print(f"nothing of stack {args.stack} is left in Azure")
    return 1 if found.leftovers else 0


def _push_targets(args: argparse.Namespace) -> int:
    names = json.loads(args.stacks)
    if problems := [p for n in names if (p := _unknown_stack(n))]:
        return _error(problems[0])
    from offline.lifecycle import push_targets
    from offline.stack_files import stack_config
    found = push_targets(names, json.load(sys.stdin), dt.datetime.now(dt.UTC), PROJECT,
                         lambda stack: stack_config(stack).lifetime)
    for stack, why in found.skipped.items():
        print(f"::notice::a push leaves stack {stack} alone: {why}", file=sys.stderr)
    print(json.dumps(found.deploy))
    return 0


def _drain_jobs(args: argparse.Namespace) -> int:
    if problem := _unknown_stack(args.stack):
        return _error(problem)
    from offline.lifecycle import drain_jobs
    from offline.stack_files import stack_needs
    namespace = stack_needs(args.stack).namespace
    if namespace is None:
        print(f"stack {args.stack} has no workload namespace: nothing to drain")
        return 0
    print(drain_jobs(args.stack, namespace))
    return 0


def _render_diff(args: argparse.Namespace) -> int:
    from offline.render_diff import changed_stacks, markdown
    print(json.dumps(changed_stacks(args.base, args.head)) if args.stacks else markdown(args.base, args.head), end="")
    return 0


def _preview_guard(args: argparse.Namespace) -> int:
    from offline.preview_guard import guarded_steps, replaced_pools
    preview = json.loads(args.preview.read_text())
    for pool in replaced_pools(preview):
        print(f"replaces node pool {pool}: its nodes and their pods are recreated (a setting AKS fixes at creation "
              "changed)")
    steps = guarded_steps(preview)
    for step in steps:
        print(f"destructive: {step}")
    if steps and not args.allow:
        print("this change would replace or delete the cluster or data storage; label the pull request "
              "allow-replace if that is intended", file=sys.stderr)
        return 1
    if not steps:
        print("no replacement or deletion of the cluster or data storage")
    return 0


def _expired_stacks(args: argparse.Namespace) -> int:
    from aksgpu.config.expiry import expired_stacks
    print(json.dumps(expired_stacks(json.load(sys.stdin), dt.datetime.now(dt.UTC), args.project)))
    return 0


def _ci_setup(args: argparse.Namespace) -> int:
    import re

    from offline.ci_setup import MAX_CREDENTIALS, load_workflows, script, subject_repo, subjects
    from offline.stack_files import REPO_ROOT, stack_files
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo):
        return _error(f"--repo {args.repo!r}: expected OWNER/NAME")
    if args.ids is not None and not re.fullmatch(r"\d+/\d+", args.ids):
        return _error(f"--ids {args.ids!r}: expected OWNER_ID/REPO_ID (gh api repos/OWNER/NAME --jq "
                      "'\"\\(.owner.id)/\\(.id)\"')")
    credentials = subjects(load_workflows(REPO_ROOT / ".github" / "workflows"), subject_repo(args.repo, args.ids),
                           sorted(stack_files()))
    if len(credentials) > MAX_CREDENTIALS:
        return _error(f"the workflows need {len(credentials)} federated credentials, more than the {MAX_CREDENTIALS} "
                      "an Entra app may have; split the stacks over two apps or use a flexible federated credential")
    print(script(args.repo, credentials, args.state_account, args.key_vault), end="")
    return 0


def _capacity(args: argparse.Namespace) -> int:
    from azure.core.exceptions import ClientAuthenticationError

    from offline import capacity
    from offline.azure_reads import AzureReadError
    from offline.stack_files import stack_config
    if problem := _unknown_stack(args.stack):
        return _error(problem)
    if not (subscription := _subscription(args)):
        return _error(NEEDS_SUBSCRIPTION)
    cfg = stack_config(args.stack)
    needs = capacity.pool_needs(cfg)
    try:
        checks = capacity.check(needs, capacity.read(capacity.connect(subscription), cfg, needs))
    except (AzureReadError, ClientAuthenticationError) as error:
        text = f"capacity of {args.stack}: not checked: {error}"
        print(text, file=sys.stderr)
        if args.markdown:
            with args.markdown.open("a") as out:
                out.write(f"### Capacity for stack `{args.stack}`: not checked\n\n{error}\n")
        return capacity.exit_code(capacity.Verdict.UNCHECKED, args.fail_on)
    for check in checks:
        print(check.line())
    table = capacity.markdown(args.stack, cfg.location, checks)
    if args.markdown:
        with args.markdown.open("a") as out:
            out.write(table)
    if args.comment and capacity.worst(checks) != capacity.Verdict.FITS:
        args.comment.write_text(table)
    return capacity.exit_code(capacity.worst(checks), args.fail_on)


def _subscription(args: argparse.Namespace) -> str | None:
    import os
    return args.subscription or os.environ.get("AZURE_SUBSCRIPTION_ID") or os.environ.get("ARM_SUBSCRIPTION_ID")


NEEDS_SUBSCRIPTION = ("--subscription (or AZURE_SUBSCRIPTION_ID or ARM_SUBSCRIPTION_ID) names the subscription to "
                      "ask")


def _image_sizes(args: argparse.Namespace) -> int:
    from offline.image_sizes import SIZES, write
    from offline.stack_files import REPO_ROOT
    for repository, found in write(REPO_ROOT).items():
        print(f"{repository}: {found['wheels']} wheels, {found['bytes'] / 1e9:.2f} GB")
    print(f"wrote {SIZES.relative_to(REPO_ROOT)}")
    return 0


def _catalogue(args: argparse.Namespace) -> int:
    from offline import catalogue
    from offline.stack_files import stack_files, stack_namespace
    if not (subscription := _subscription(args)):
        return _error(NEEDS_SUBSCRIPTION)
    # Raw stack files, not configs: a stack that names a size the catalogue lacks must not stop the refresh.
    raw = [stack_namespace(path) for path in stack_files().values()]
    regions = args.regions.split(",") if args.regions else sorted(
        {r.get("location", "eastus") for r in raw} | set(catalogue.DEFAULT_REGIONS))
    sizes = {p.get("vmSize") for r in raw
             for p in [*(r.get("gpuPools") or []), *(r.get("cpuPools") or []),
                       (r.get("cluster") or {}).get("systemPool") or {}]} - {None}
    sizes |= {"Standard_D4ds_v5"}  # the system and CPU pools' default size
    for note in catalogue.refresh(subscription, regions, sizes, prices=not args.no_prices):
        print(note)
    print(f"wrote {catalogue.CATALOGUE.name}" + ("" if args.no_prices else f" and {catalogue.PRICES.name} "
          f"({len(regions)} regions)") + "; review the diff, run the tests, commit")
    return 0


def _new_stack(args: argparse.Namespace) -> int:
    from offline.docs import write_docs
    from offline.new_stack import new_stack_file
    settings = {k: v for k, v in (("nameRoot", args.name_root), ("owner", args.owner), ("lifetime", args.lifetime))
                if v is not None}
    try:
        path = new_stack_file(args.name, args.like, settings)
    except ValueError as error:
        return _error(str(error))
    updated = write_docs()
    print(f"wrote {path.name}; regenerated {', '.join(map(str, updated)) or 'no docs (none changed)'}")
    print(f"next: review and commit them; deploy with `pulumi stack select --create {args.name}` and `pulumi up "
          f"--policy-pack policy`, or the deploy workflow with stack {args.name}, whose environment needs its "
          "federated credential (python -m offline ci-setup prints it)")
    return 0


@dataclass(frozen=True)
class Command:
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _render_arguments(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--stack", help="stack name (Pulumi.<stack>.yaml)")
    which.add_argument("--all", action="store_true", help="every Pulumi.<stack>.yaml in the project")
    p.add_argument("--config", type=Path, help="config file to use instead of Pulumi.<stack>.yaml")
    p.add_argument("--out", type=Path, default=Path("out"), help="output directory (default: out)")


def _stack_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", required=True, help="stack name (Pulumi.<stack>.yaml)")


COMMANDS: dict[str, Command] = {
    "render": Command("render stacks under Pulumi mocks into DIR/<stack>/", _render_arguments, _render),
    "docs": Command("regenerate the generated docs (configuration, JSON Schema, estimates, README table)",
                    lambda p: p.add_argument("--check", action="store_true", help="fail if a generated file is stale"),
                    _docs),
    "stacks": Command("the project's stacks as a JSON list",
                      lambda p: p.add_argument("--check", metavar="NAME", help="exit 2 unless NAME is a stack"),
                      _stacks),
    "matrix": Command("a workflow job matrix {include: [{stack, runner}]} (private stacks: their own runner)",
                      lambda p: p.add_argument("stacks", nargs="*", help="stack names, or one JSON list of them"),
                      _matrix),
    "lifetime": Command("print the stack's lifetime: demo or long-lived", _stack_argument, _lifetime),
    "render-diff": Command("what changed between two render folders (markdown, or the changed stacks as JSON)",
                           lambda p: (p.add_argument("base", type=Path, help="the base branch's render folder"),
                                      p.add_argument("head", type=Path, help="the pull request's render folder"),
                                      p.add_argument("--stacks", action="store_true",
                                                     help="print the changed stacks as a JSON list")),
                           _render_diff),
    "preview-guard": Command("fail on a `pulumi preview --json` that replaces the cluster or data storage",
                             lambda p: (p.add_argument("preview", type=Path, help="the preview's JSON file"),
                                        p.add_argument("--allow", action="store_true",
                                                       help="report, but exit 0 (label allow-replace)")),
                             _preview_guard),
    "expired-stacks": Command("demo stacks past their expiry, from `az group list` JSON on stdin",
                              lambda p: p.add_argument("--project", default=PROJECT, help="Pulumi project name"),
                              _expired_stacks),
    "leftovers": Command("what of a destroyed stack is still in Azure, but its protected data (needs az)",
                         lambda p: (_stack_argument(p),
                                    p.add_argument("--retain", action="store_true",
                                                   help="mark the group kept for protected data lifetime: retained")),
                         _leftovers),
    "push-targets": Command("of the changed stacks (a JSON list), those a push deploys: live or long-lived ones, "
                            "from `az group list` JSON on stdin",
                            lambda p: p.add_argument("stacks", help="the changed stacks, a JSON list"),
                            _push_targets),
    "new-stack": Command("a new environment: Pulumi.NAME.yaml from a stack of the same scenario, checked, and the "
                         "generated docs brought up to date",
                         lambda p: (p.add_argument("name", help="the new stack's name"),
                                    p.add_argument("--like", required=True, help="the stack to start from"),
                                    p.add_argument("--name-root", help="nameRoot (stack names over 20 characters)"),
                                    p.add_argument("--owner", help="owner tag"),
                                    p.add_argument("--lifetime", choices=("demo", "long-lived"), help="lifetime")),
                         _new_stack),
    "ci-setup": Command("print the Azure setup the workflows need (federated credentials from the workflows, "
                        "roles, resource providers, repository variables) as a script to review and run",
                        lambda p: (p.add_argument("--repo", required=True, help="the GitHub repository, OWNER/NAME"),
                                   p.add_argument("--ids", help="OWNER_ID/REPO_ID: subjects in the immutable form of "
                                                  "repositories created after 2026-06-18"),
                                   p.add_argument("--state-account", help="the state backend's storage account"),
                                   p.add_argument("--key-vault", help="the secrets provider's Key Vault")),
                        _ci_setup),
    "capacity": Command("can the stack's pools get their VMs: quota, sizes offered in its region and zones, spot "
                        "placement scores, one line per pool with the fix (asks Azure: az login or OIDC); exit code "
                        "0 fits, 1 fits at min only, 2 does not fit, 3 not checked",
                        lambda p: (_stack_argument(p),
                                   p.add_argument("--subscription", help="default: AZURE_SUBSCRIPTION_ID or "
                                                  "ARM_SUBSCRIPTION_ID"),
                                   p.add_argument("--markdown", type=Path, help="append the summary table to this "
                                                  "file (the workflows' $GITHUB_STEP_SUMMARY)"),
                                   p.add_argument("--fail-on", choices=("no-fit", "min-only", "never"),
                                                  help="exit 1 from this verdict on, else 0 (the workflows: no-fit)"),
                                   p.add_argument("--comment", type=Path, help="write the table to this file only "
                                                  "when a pool does not fit in full (the pull request's comment)")),
                        _capacity),
    "image-sizes": Command("measure the GPU images' locked wheels on PyPI (asks pypi.org) into "
                           "offline/estimates/image_sizes.json, which the first-GPU-pod estimate cites",
                           lambda p: None, _image_sizes),
    "catalogue": Command("refresh the GPU catalogue (Resource SKUs: sizes, quota families, regions, zones, spot) and "
                         "the VM prices (Retail Prices API) into their committed files (asks Azure: az login)",
                         lambda p: (p.add_argument("--subscription", help="default: AZURE_SUBSCRIPTION_ID or "
                                                   "ARM_SUBSCRIPTION_ID"),
                                    p.add_argument("--regions", help="comma-separated regions to price (default: the "
                                                   "stack files' regions and offline.catalogue.DEFAULT_REGIONS)"),
                                    p.add_argument("--no-prices", action="store_true", help="the catalogue only")),
                         _catalogue),
    "drain-jobs": Command("before a destroy: delete the Jobs in the stack's namespace, so Kueue lets its queue go "
                          "(needs pulumi and kubectl)", _stack_argument, _drain_jobs),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m offline", description="The offline tools, which need no "
                                     "cloud, Pulumi CLI or credentials, and the workflows' helpers (those that ask "
                                     "Azure or a cluster say so).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.arguments(sub.add_parser(name, help=command.help, description=command.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command].run(args)
    except ConfigError as error:
        return _error(str(error))


if __name__ == "__main__":
    sys.exit(main())
