"""`python -m ops ci-setup`: the Azure side of the workflows, derived from the workflows (round-3 audit #10,
#14, #15; newcomer #5)."""

from __future__ import annotations

import re
import subprocess

from offline.mocks import azure_id
from offline.stack_files import REPO_ROOT, stack_files
from ops.ci_setup import RESOURCE_PROVIDERS, load_workflows, subject_repo, subjects
from tests.helpers import command
from tests.tools import venv_tool

WORKFLOWS = load_workflows(REPO_ROOT / ".github" / "workflows")


def test_each_token_the_workflows_ask_for_has_its_federated_credential():
    """GitHub's OIDC reference: a job in an environment gets `repo:O/R:environment:<name>`, a pull request
    `repo:O/R:pull_request`, anything else `repo:O/R:ref:<ref>`; one credential per subject (AADSTS70021)."""
    found = subjects(WORKFLOWS, "acme/infra", sorted(stack_files()))
    assert found == {"main": "repo:acme/infra:ref:refs/heads/main",
                     "pull-request": "repo:acme/infra:pull_request",
                     **{f"environment-{s}": f"repo:acme/infra:environment:{s}" for s in stack_files()}}


def test_a_reusable_workflow_runs_with_its_callers_subject_and_jobs_without_tokens_need_none():
    workflows = {
        "nightly.yml": {"on": {"schedule": [{"cron": "0 0 * * *"}]}, "permissions": {"contents": "read"},
                        "jobs": {"call": {"uses": "./.github/workflows/reusable.yml",
                                          "permissions": {"id-token": "write"}},
                                 "lint": {"runs-on": "x", "steps": []}}},
        "reusable.yml": {"on": {"workflow_call": {}},
                         "jobs": {"go": {"permissions": {"id-token": "write"}, "environment": "prod"}}},
        "review.yml": {"on": ["pull_request"], "jobs": {"read": {"permissions": {"contents": "read"}}}},
    }
    assert subjects(workflows, "o/r", ["a"]) == {"environment-prod": "repo:o/r:environment:prod"}


def test_new_repositories_get_subjects_with_their_immutable_ids():
    """GitHub changelog 2026-04: repositories created after 2026-06-18 carry owner and repository ids."""
    assert subjects(WORKFLOWS, subject_repo("acme/infra", "123/456"), ["dev"])["main"] == \
        "repo:acme-123/infra-456:ref:refs/heads/main"


def test_every_namespace_a_stack_creates_resources_in_is_registered(render_of, renders):
    """Round-3 audit #10: a fresh subscription refuses unregistered namespaces (MissingSubscriptionRegistration,
    pulumi/pulumi-azure-native#3479: not auto-registered for extension resources such as diagnostic settings)."""
    always = {"Microsoft.Resources", "Microsoft.Authorization"}  # registered in every subscription
    for stack in renders:
        for r in render_of(stack).resources:
            if r.type.startswith("azure-native:"):
                namespace = azure_id(r.type, r.name, r.inputs).rsplit("/providers/", 1)[1].split("/")[0] \
                    if r.type != "azure-native:resources:ResourceGroup" else "Microsoft.Resources"
                assert namespace in set(RESOURCE_PROVIDERS) | always, (stack, r.type, namespace)


def test_the_setup_is_a_valid_script_with_roles_that_create_and_assign():
    """Round-3 audit #15: User Access Administrator alone creates nothing; the program makes its own groups."""
    result = command("ops", "ci-setup", "--repo", "acme/infra", "--state-account", "stacme", "--key-vault", "kv-acme")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    lint = subprocess.run([venv_tool("shellcheck"), "--shell=bash", "-"], input=text, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    assert re.search(r"--role Contributor --scope \"/subscriptions/\$subscription\"", text)
    assert "--role 'Role Based Access Control Administrator'" in text
    assert len(re.findall(r"az ad app federated-credential create", text)) == len(stack_files()) + 2
    assert all(f"az provider register --namespace {p}" in text for p in RESOURCE_PROVIDERS)
    assert "gh variable set PULUMI_SECRETS_PROVIDER --repo acme/infra --body " \
           "azurekeyvault://kv-acme.vault.azure.net/keys/pulumi" in text


def test_a_setup_without_the_state_backend_is_refused_naming_what_is_missing():
    """Newcomer #6: the workflows log in to PULUMI_BACKEND_URL with PULUMI_SECRETS_PROVIDER; a script that sets
    neither leaves every run failing later, so the command refuses it."""
    result = command("ops", "ci-setup", "--repo", "acme/infra")
    assert result.returncode == 2
    assert "--state-account" in result.stderr and "--key-vault" in result.stderr and not result.stdout
