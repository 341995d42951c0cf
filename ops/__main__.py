"""python -m ops COMMAND: what asks Azure, a cluster or PyPI, or decides for the workflows (which stacks, which
runner, what a push deploys, what a destroy left). Each command's help says what it asks; the offline tools are
``python -m offline``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from offline.cli import (
    COMPLETION,
    Command,
    checked,
    dispatch,
    input_file,
    no_arguments,
    output_folder,
    stack_argument,
    stack_list,
    stack_name,
)
from program.config.keys import PROJECT
from program.config.naming import key_vault_name_error, storage_account_name_error


def _subscription_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--subscription",
                   help="default: AZURE_SUBSCRIPTION_ID or ARM_SUBSCRIPTION_ID, else the one `az account show` names")


def _json_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object instead of lines, for scripts and "
                   "dashboards (the exit code is the same)")


def _capacity_arguments(p: argparse.ArgumentParser) -> None:
    stack_argument(p)
    _subscription_argument(p)
    _json_argument(p)
    p.add_argument("--markdown", type=Path, help="append the summary table to this file (the workflows' "
                   "$GITHUB_STEP_SUMMARY)")
    p.add_argument("--fail-on", choices=("no-fit", "min-only", "never"),
                   help="exit 1 from this verdict on, else 0 (the workflows: no-fit)")
    p.add_argument("--comment", type=Path, help="write the table to this file only when a pool does not fit in full "
                   "(the pull request's comment)")


def region_list(value: str) -> str:
    """Comma-separated Azure region names, each one Azure lists (components/azure/regions.yaml)."""
    from components.azure.regions import region_error
    for region in value.split(","):
        if (problem := region_error(region)) is not None:
            raise argparse.ArgumentTypeError(f"{region!r} {problem}")
    return value


def _catalogue_arguments(p: argparse.ArgumentParser) -> None:
    _subscription_argument(p)
    p.add_argument("--regions", type=region_list, help="comma-separated regions to price (default: the stack "
                   "files' regions and ops.catalogue.DEFAULT_REGIONS)")
    p.add_argument("--no-prices", action="store_true", help="the catalogue only")
    _json_argument(p)


def _ci_setup_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", required=True, help="the GitHub repository, OWNER/NAME")
    p.add_argument("--sub-prefix", help="the token subjects' prefix, verbatim (repo:OWNER@OWNER_ID/NAME@REPO_ID, or "
                   "repo:OWNER/NAME for an older repository); default: GitHub's, from gh api "
                   "repos/OWNER/NAME/actions/oidc/customization/sub")
    # Required: the workflows log in to this backend (PULUMI_BACKEND_URL, PULUMI_SECRETS_PROVIDER); a script without
    # them sets up an identity whose every workflow run then fails at `pulumi login`.
    p.add_argument("--state-account", required=True, type=checked(storage_account_name_error),
                   help="the state backend's storage account: its name, not its URL (docs/lifecycle.md)")
    p.add_argument("--key-vault", required=True, type=checked(key_vault_name_error),
                   help="the secrets provider's Key Vault: its name, not its URL (docs/lifecycle.md)")


def _leftovers_arguments(p: argparse.ArgumentParser) -> None:
    stack_argument(p)
    p.add_argument("--retain", action="store_true", help="mark the group kept for protected data lifetime: retained")
    _json_argument(p)


def _image_store_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--daemon-json", type=Path, default=Path("/etc/docker/daemon.json"),
                   help="the daemon's configuration, kept but for the containerd-snapshotter feature (default: "
                        "%(default)s; a missing file is an empty one)")
    p.add_argument("--check", action="store_true", help="print nothing and exit 2 if the store is still containerd "
                   "(after the switch)")


def minutes(value: str) -> float:
    """A step's timeout in minutes: a number above zero."""
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not number > 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of minutes above zero")
    return number


def _e2e_arguments(p: argparse.ArgumentParser) -> None:
    stack_argument(p)
    p.add_argument("--keep", action="store_true", help="leave the stack up: no destroy and no leftover check")
    p.add_argument("--results", type=output_folder, help="the folder the run's file goes to (default: docs/results)")
    p.add_argument("--timeout-minutes", type=minutes, default=60.0, metavar="N",
                   help="how long each of pulumi up, the probes and pulumi destroy may take before it is interrupted "
                        "(default 60)")
    p.add_argument("--drill-timeout-minutes", type=minutes, default=90.0, metavar="N",
                   help="how long the spot drill may take: Azure evicts within 30 minutes of the call (default 90)")


def _e2e_cleanup_arguments(p: argparse.ArgumentParser) -> None:
    stack_argument(p)
    p.add_argument("--timeout-minutes", type=minutes, default=60.0, metavar="N",
                   help="how long pulumi destroy may take, both attempts together (default 60)")


def _e2e_matrix_arguments(p: argparse.ArgumentParser) -> None:
    from ops.e2e.budget import ALL, max_cost, max_total_cost
    p.add_argument("stacks", help=f"stack names separated by commas or spaces, or {ALL}")
    p.add_argument("--max-cost", type=max_cost, default="", metavar="USD",
                   help="refuse a stack whose run can cost more than this (default: ops.e2e.budget."
                        "DEFAULT_MAX_COST_USD; empty: the default)")
    p.add_argument("--max-total-cost", type=max_total_cost, default="", metavar="USD",
                   help="refuse a stack that would take the runs' total above this (default: ops.e2e.budget."
                        "DEFAULT_MAX_TOTAL_COST_USD; empty: the default)")
    p.add_argument("--summary", type=Path, help="append the plan as a Markdown table to this file (the workflow's "
                   "$GITHUB_STEP_SUMMARY)")
    p.add_argument("--project", default=PROJECT, help="Pulumi project name (whose resource groups mark a stack up)")


def _preview_guard_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("preview", type=input_file, help="the preview's JSON file")
    p.add_argument("--allow", action="store_true", help="report, but exit 0 (label allow-replace)")
    _json_argument(p)


COMMANDS = {
    # Azure, with Microsoft's SDK (make install-azure; az login or the workflows' OIDC)
    "capacity": Command("can the stack's pools get their VMs: quota, sizes offered in its region and zones, spot "
                        "placement scores, one line per pool with the fix (asks Azure); exit code 0 fits, 1 fits at "
                        "min only, 2 does not fit, 3 not checked", _capacity_arguments,
                        "ops.capacity:capacity_command"),
    "catalogue": Command("refresh the GPU catalogue (Resource SKUs: sizes, quota families, regions, zones, spot) and "
                         "the VM prices (Retail Prices API) into their committed files (asks Azure)",
                         _catalogue_arguments, "ops.catalogue:catalogue_command"),
    "leftovers": Command("what of a destroyed stack is still in Azure, but its protected data (needs az)",
                         _leftovers_arguments, "ops.lifecycle:leftovers_command"),
    "e2e": Command("deploy the stack to Azure, measure its phases, run its probes and the spot drill, destroy it "
                   "and look for leftovers, into one results file (needs pulumi, az, kubectl, kubelogin and make "
                   "install-azure; docs/e2e.md); exit code 0 passed, 1 a step, probe or leftover failed it, 2 bad "
                   "input", _e2e_arguments, "ops.e2e.run:e2e_command"),
    "e2e-cleanup": Command("after an end-to-end run that may not have reached its destroy (a cancelled or killed "
                           "workflow job): destroy what the backend holds of the stack's e2e deployment but its "
                           "protected data, and look for leftovers (needs pulumi, az, kubectl and kubelogin); exit "
                           "code 0 nothing left, 1 something is", _e2e_cleanup_arguments,
                           "ops.e2e.run:e2e_cleanup_command"),
    "drain-jobs": Command("before a destroy: delete the Jobs in the stack's namespace, so Kueue lets its queue go "
                          "(needs pulumi and kubectl)", stack_argument, "ops.lifecycle:drain_jobs_command"),
    "image-sizes": Command("measure the GPU images' locked wheels on PyPI (asks pypi.org) into "
                           "offline/estimates/image_sizes.json, which the first-GPU-pod estimate cites",
                           no_arguments, "ops.image_sizes:image_sizes_command"),
    # The workflows' decisions, from the stack files and what they pipe in
    "stacks": Command("the project's stacks as a JSON list",
                      lambda p: p.add_argument("--check", metavar="NAME", type=stack_name,
                                               help="exit 2 unless NAME is a stack"),
                      "ops.runners:stacks_command"),
    "matrix": Command("a workflow job matrix {include: [{stack, runner}]} (private stacks: their own runner)",
                      lambda p: p.add_argument("stacks", nargs="*", help="stack names, or one JSON list of them"),
                      "ops.runners:matrix_command"),
    "image-store": Command("the daemon.json that gives Docker the classic image store pulumi-docker's Image needs "
                           "(pulumi/pulumi-docker#967), from `docker info --format '{{json .DriverStatus}}'` on stdin; "
                           "nothing where Docker has it", _image_store_arguments, "ops.runners:image_store_command"),
    "e2e-matrix": Command("the e2e workflow's job matrix: the requested stacks that are not up now (`az group list` "
                          "JSON on stdin) and whose estimated run cost is within --max-cost; each refused one in one "
                          "line", _e2e_matrix_arguments, "ops.e2e.budget:e2e_matrix_command"),
    "lifetime": Command("print the stack's lifetime: demo or long-lived", stack_argument,
                        "ops.lifecycle:lifetime_command"),
    "push-targets": Command("of the changed stacks (a JSON list), those a push deploys: live or long-lived ones, "
                            "from `az group list` JSON on stdin",
                            lambda p: p.add_argument("stacks", type=stack_list,
                                                     help="the changed stacks, a JSON list"),
                            "ops.lifecycle:push_targets_command"),
    "expired-stacks": Command("demo stacks past their expiry, from `az group list` JSON on stdin",
                              lambda p: p.add_argument("--project", default=PROJECT, help="Pulumi project name"),
                              "ops.lifecycle:expired_stacks_command"),
    "expiry-schedule": Command("whether a deploy turns the expiry schedule back on (enable or keep), from `gh api "
                               "repos/OWNER/NAME/actions/workflows/destroy-expired.yml` on stdin", lambda p: None,
                               "ops.lifecycle:expiry_schedule_command"),
    "preview-backend": Command("where a pull request previews the stack: shared (the backend holds it) or local "
                               "(a stack the pull request adds), from `pulumi stack ls --json` on stdin",
                               stack_argument, "ops.lifecycle:preview_backend_command"),
    "preview-guard": Command("fail on a `pulumi preview --json` that replaces the cluster or data storage",
                             _preview_guard_arguments, "ops.preview_guard:preview_guard_command"),
    "ci-setup": Command("print the Azure setup the workflows need (a deploy and a preview app, their federated "
                        "credentials from the workflows, roles, resource providers and features, repository "
                        "variables) as a script to review and run again (asks GitHub for the subject prefix)",
                        _ci_setup_arguments, "ops.ci_setup:ci_setup_command"),
    "completion": COMPLETION,
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("python -m ops", "What asks Azure, a cluster or PyPI, or decides for the workflows.", COMMANDS,
                    argv)


if __name__ == "__main__":
    sys.exit(main())
