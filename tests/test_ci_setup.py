"""`python -m ops ci-setup`: the Azure side of the workflows, derived from the workflows (round-3 audit #10,
#14, #15; newcomer #5; round-4 Azure audit #1, #4, #11, #14; round-4 newcomer #9)."""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import jq as jq_library
import pytest
import yaml

from components.azure import roles
from offline.mocks import azure_id
from offline.stack_files import REPO_ROOT, stack_config, stack_files
from ops import ci_setup
from ops.ci_setup import (
    MAX_CREDENTIALS,
    PROGRAM_ROLES,
    RESOURCE_PROVIDERS,
    assignable_condition,
    deploy_environments,
    github_prefix,
    identities,
    load_workflows,
    subjects,
)
from tests.fake_cli import shim
from tests.helpers import command
from tests.tools import venv_tool

WORKFLOWS = load_workflows(REPO_ROOT / ".github" / "workflows")
SCENARIOS = sorted({stack_config(s).scenario for s in stack_files()})
OLD_REPO = {"use_default": True, "use_immutable_subject": False, "sub_claim_prefix": "repo:acme/infra"}
NEW_REPO = {"use_default": True, "use_immutable_subject": False, "sub_claim_prefix": "repo:acme@123/infra@456"}
"""What GitHub's OIDC customization endpoint answers for a repository created before and after the immutable-subject
cut-over (as observed and published by users of the endpoint; the Entra migration guide, learn.microsoft.com/entra/
workload-id/workload-identities-github-immutable-subjects, gives the `@` form)."""

BACKEND = ("--state-account", "stacme", "--key-vault", "kv-acme")
"""The state backend every ci-setup is given (it refuses to set up without one)."""


def test_each_token_the_workflows_ask_for_has_its_federated_credential_on_the_app_its_code_may_use():
    """GitHub's OIDC reference: a job in an environment gets `<prefix>:environment:<name>`, a pull request
    `<prefix>:pull_request`, anything else `<prefix>:ref:<ref>`; one credential per subject (AADSTS70021). Pull
    requests run their own code, so their token goes to the preview app only (round-4 Azure audit #11)."""
    found = subjects(WORKFLOWS, "repo:acme/infra", SCENARIOS)
    assert found == {"deploy": {"main": "repo:acme/infra:ref:refs/heads/main",
                                **{f"environment-{s}": f"repo:acme/infra:environment:{s}" for s in SCENARIOS}},
                     "preview": {"pull-request": "repo:acme/infra:pull_request"}}


def test_end_to_end_runs_sign_in_with_the_deploy_apps_credentials_and_need_no_new_one():
    """Issue 37: e2e.yml's plan and the cleanups of e2e-stack.yml (which it calls) run main's code in no environment
    (dispatch and schedule: `ref:refs/heads/main`), its runs in the scenarios' environments, its pull request job asks
    for no token: the deploy app's credentials already cover them, and the preview app gets none."""
    e2e = subjects({name: WORKFLOWS[name] for name in ("e2e.yml", "e2e-stack.yml")}, "repo:acme/infra", SCENARIOS)
    assert set(e2e) == {"deploy"} and e2e["deploy"] == subjects(WORKFLOWS, "repo:acme/infra", SCENARIOS)["deploy"]
    # Audit 37c NIT 3: the cleanup alone (the plan's credential would hide a break) signs in with main's.
    caller = {**WORKFLOWS["e2e.yml"], "jobs": {"stack": WORKFLOWS["e2e.yml"]["jobs"]["stack"]}}
    callee = {**WORKFLOWS["e2e-stack.yml"], "jobs": {"cleanup": WORKFLOWS["e2e-stack.yml"]["jobs"]["cleanup"]}}
    assert subjects({"e2e.yml": caller, "e2e-stack.yml": callee}, "repo:acme/infra", SCENARIOS) == {
        "deploy": {"main": "repo:acme/infra:ref:refs/heads/main"}}


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
    assert subjects(workflows, "repo:o/r", ["a"]) == {"deploy": {"environment-prod": "repo:o/r:environment:prod"}}


@pytest.mark.parametrize("answer", [OLD_REPO, NEW_REPO], ids=["created-before-2026-07-15", "created-today"])
def test_the_subject_prefix_is_the_one_github_signs_for_the_repository_whatever_its_age(answer):
    """Round-4 Azure audit #1: GitHub decides the prefix (name-only for older repositories, `owner@id/repo@id` for
    repositories created or renamed from 2026-07-15); ci-setup reads it from the OIDC customization endpoint and
    builds nothing of it."""
    asked = []
    prefix = github_prefix("acme/infra", lambda path: asked.append(path) or json.dumps(answer))
    assert asked == ["repos/acme/infra/actions/oidc/customization/sub"]
    assert prefix == answer["sub_claim_prefix"]
    deploy = subjects(WORKFLOWS, prefix, SCENARIOS)["deploy"]
    assert deploy["main"] == f"{answer['sub_claim_prefix']}:ref:refs/heads/main"


def _setup(capsys, gh_answer=None, **flags) -> tuple[int, str, str]:
    args = argparse.Namespace(repo="acme/infra", sub_prefix=None, state_account=None, key_vault=None, **flags)

    def gh_api(path: str) -> str:
        if isinstance(gh_answer, Exception):
            raise gh_answer
        return json.dumps(gh_answer)
    status = ci_setup.ci_setup_command(args, gh_api)
    out, err = capsys.readouterr()
    return status, out, err


def test_a_new_repository_gets_subjects_with_its_immutable_ids_in_the_script(capsys):
    status, out, _ = _setup(capsys, NEW_REPO)
    assert status == 0
    assert '"subject": "repo:acme@123/infra@456:ref:refs/heads/main"' in out
    assert '"subject": "repo:acme@123/infra@456:pull_request"' in out
    assert "acme-123" not in out  # the withdrawn hyphen form


def test_a_prefix_given_verbatim_is_used_as_given_and_a_malformed_one_is_one_line(capsys):
    result = command("ops", "ci-setup", "--repo", "acme/infra", *BACKEND, "--sub-prefix", "repo:acme@123/infra@456")
    assert result.returncode == 0 and "repo:acme@123/infra@456:environment:gpu-basics" in result.stdout
    bad = command("ops", "ci-setup", "--repo", "acme/infra", *BACKEND, "--sub-prefix", "acme-123/infra-456")
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1
    assert "--sub-prefix 'acme-123/infra-456'" in bad.stderr and "repo:acme@OWNER_ID/infra@REPO_ID" in bad.stderr


@pytest.mark.parametrize("answer, says", [
    (ci_setup.PrefixError("gh: Not Found (HTTP 404)"),
     "could not read repos/acme/infra/actions/oidc/customization/sub"),
    ({"use_default": False, "include_claim_keys": ["repo", "context"]}, "customizes its OIDC subject template"),
    ({"use_default": True}, "gave no sub_claim_prefix"),
])
def test_when_github_does_not_say_the_prefix_the_error_offers_both_forms_verbatim(capsys, answer, says):
    status, out, err = _setup(capsys, answer)
    assert status != 0 and not out and err.count("\n") == 1 and says in err
    assert "--sub-prefix verbatim: repo:acme@OWNER_ID/infra@REPO_ID" in err and "2026-07-15" in err


def test_forty_stacks_fit_the_credential_limit_because_deploys_run_in_their_scenarios_environment(tmp_path):
    """Round-4 newcomer #9: one environment per stack needed 15 of an app's 20 credentials for 13 stacks. Deploys
    run in their scenario's environment (``ops matrix``), so a dev, staging and prod of every scenario add none."""
    committed = stack_files()
    files = {}
    for i in range(40):
        source = list(committed.values())[i % len(committed)]
        files[f"team-{i}"] = shutil.copy(source, tmp_path / f"Pulumi.team-{i}.yaml")
    assert len(files) == 40
    apps = identities(WORKFLOWS, "repo:acme@1/infra@2", deploy_environments({k: Path(v) for k, v in files.items()}))
    assert all(len(app.credentials) <= MAX_CREDENTIALS for app in apps)
    assert len(next(a for a in apps if a.role == "deploy").credentials) == len(SCENARIOS) + 1


def test_every_deploy_job_runs_in_its_stacks_scenario_environment():
    from ops.runners import matrix
    rows = matrix(sorted(stack_files()))["include"]
    assert {r["environment"] for r in rows} <= set(SCENARIOS)
    assert all(r["environment"] == stack_config(r["stack"]).scenario for r in rows)
    assert WORKFLOWS["deploy.yml"]["jobs"]["up"]["environment"] in ci_setup.ENVIRONMENT_EXPRESSIONS


def _allows(condition: str, action: str, role_id: str, principal_type: str) -> bool:
    """Whether an RBAC condition (the subset assignable_condition writes: ActionMatches, ForAnyOfAnyValues:GuidEquals
    and :StringEqualsIgnoreCase over a set, !, AND, OR; learn.microsoft.com/azure/role-based-access-control/
    conditions-format) lets ``action`` on a role assignment of ``role_id`` to a ``principal_type`` through."""
    import re
    expression = re.sub(r"ActionMatches\{'([^']+)'\}", lambda m: repr(m[1] == action), condition)
    expression = re.sub(r"@(?:Request|Resource)\[Microsoft\.Authorization/roleAssignments:RoleDefinitionId\] "
                        r"ForAnyOfAnyValues:GuidEquals \{([^}]*)\}",
                        lambda m: repr(role_id.lower() in {g.strip().lower() for g in m[1].split(",")}), expression)
    expression = re.sub(r"@(?:Request|Resource)\[Microsoft\.Authorization/roleAssignments:PrincipalType\] "
                        r"ForAnyOfAnyValues:StringEqualsIgnoreCase \{([^}]*)\}",
                        lambda m: repr(principal_type.lower() in {t.strip(" '").lower() for t in m[1].split(",")}),
                        expression)
    _grouped(condition)
    expression = expression.replace("!", " not ").replace(" AND ", " and ").replace(" OR ", " or ")
    assert re.fullmatch(r"[()\sA-Za-z]*", expression) and set(re.findall(r"[A-Za-z]+", expression)) <= {
        "True", "False", "not", "and", "or"}, expression  # every part of the condition understood
    return bool(eval(expression, {"__builtins__": {}}))  # noqa: S307 (only True/False/not/and/or, checked above)


def _grouped(condition: str) -> None:
    """Azure's grouping rule (conditions-format, "Grouping and precedence": with three expressions or more,
    parentheses must say the order; ``a AND b OR c`` is refused): no parenthesis level mixes AND and OR."""
    import re
    levels: list[set[str]] = [set()]
    for token in re.findall(r"\(|\)|\bAND\b|\bOR\b|\{[^}]*\}", condition):
        if token == "(":
            levels.append(set())
        elif token == ")":
            assert len(levels[-1]) < 2, condition
            levels.pop()
        elif token in ("AND", "OR"):
            levels[-1].add(token)
    assert len(levels) == 1 and len(levels[0]) < 2, condition


WRITE, DELETE = "Microsoft.Authorization/roleAssignments/write", "Microsoft.Authorization/roleAssignments/delete"
OWNER, USER_ACCESS_ADMIN = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635", "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9"
AKS_CLUSTER_ADMIN = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"


def test_the_deploy_app_may_assign_only_the_roles_the_program_assigns_to_service_principals(render_of, renders):
    """Round-4 Azure audit #11: an unconditioned RBAC Administrator could grant itself Owner; constrained to the
    program's roles, on create and on delete. Issue 33b audit #10: and to the principal types the program assigns
    to, or it could grant Contributor to any user (delegate-role-assignments-examples: "Constrain roles and principal
    types", PrincipalType a request attribute of write). The workflows deploy with cluster.deployerPrincipalType
    ServicePrincipal, so every assignment a CI deploy makes is to one; the admin groups (cluster.adminGroupObjectIds)
    go to the cluster's Entra ID profile, never to a role assignment."""
    assignments = [(stack, r) for stack in renders
                   for r in render_of(stack).of_type("azure-native:authorization:RoleAssignment")]
    assert {r.inputs["roleDefinitionId"].rsplit("/", 1)[1] for _, r in assignments} <= set(PROGRAM_ROLES)
    for stack, r in assignments:  # the deployer's own type, else a managed identity's
        assert r.inputs["principalType"] in {"ServicePrincipal", render_of(stack).cfg.cluster.deployer_principal_type}
    for workflow in ("deploy.yml", "pull-request.yml"):
        assert "'aksgpu:cluster.deployerPrincipalType' ServicePrincipal" in (
            REPO_ROOT / ".github" / "workflows" / workflow).read_text()
    assert ci_setup.ASSIGNEE_TYPES == ("ServicePrincipal",)
    condition = assignable_condition()
    assert not {OWNER, USER_ACCESS_ADMIN} & set(PROGRAM_ROLES)
    for role in PROGRAM_ROLES:
        assert _allows(condition, WRITE, role, "ServicePrincipal")
        assert not _allows(condition, WRITE, role, "User") and not _allows(condition, WRITE, role, "Group")
    for role in (OWNER, USER_ACCESS_ADMIN):
        assert not _allows(condition, WRITE, role, "ServicePrincipal")
        assert not _allows(condition, DELETE, role, "User")  # nor take an admin's access away
    assert _allows(condition, "Microsoft.Authorization/roleAssignments/read", OWNER, "User")


def test_the_deploy_app_may_delete_only_the_programs_deployer_roles_of_users_and_groups(render_of, renders):
    """Final audit: with PrincipalType on delete too, an assignment a stack made to a user or a group (a local
    `pulumi up` with cluster.deployerPrincipalType User: AKS RBAC Cluster Admin, the Grafana admin, the blob data
    roles) could not be replaced or destroyed by the deploy app, and that `pulumi up` failed with 403. Issue 33c
    audit #11: held to the roles alone, the delete let it remove anyone's Contributor in the subscription; now a
    user's or group's assignment goes only for the roles the program gives the deployer, found in the renders
    (delegate-role-assignments-examples, "Constrain roles and principal types": the delete half held to
    @Resource PrincipalType)."""
    from tests.helpers import render_with
    grafana = render_with(monitoring={"grafana": True})  # no stack file has one
    assigned = [r for r in (*(r for stack in renders for r in render_of(stack).resources), *grafana.resources)
                if r.type == "azure-native:authorization:RoleAssignment"]
    local = {r.inputs["roleDefinitionId"].rsplit("/", 1)[1] for r in assigned
             if r.inputs["principalType"] != "ServicePrincipal"}
    assert local == set(roles.DEPLOYER_ROLES)
    condition = assignable_condition()
    for role in PROGRAM_ROLES:
        assert _allows(condition, DELETE, role, "ServicePrincipal")
        for principal_type in ("User", "Group"):
            assert _allows(condition, DELETE, role, principal_type) is (role in roles.DEPLOYER_ROLES), role
    assert not _allows(condition, DELETE, roles.CONTRIBUTOR, "User")
    assert not _allows(condition, DELETE, roles.NETWORK_CONTRIBUTOR, "Group")


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


def _fake_answer(tool: str, args: list[str], stdin: str, path: Path) -> tuple[int, str, str]:
    """One call of the fake az or gh: (exit status, stdout, stderr), the cloud kept in the JSON file ``path``.

    Entra ID, ARM and GitHub as the script sees them, refusing what they refuse: a credential name twice, an
    assignment twice or to a principal by app id, a deployment branch policy on an environment without custom ones
    (docs.github.com/rest/deployments/branch-policies)."""
    cloud = json.loads(path.read_text()) if path.exists() else {}
    for key, empty in (("apps", {}), ("sps", {}), ("creds", {}), ("roles", []), ("calls", []), ("variables", {}),
                       ("environments", {})):
        cloud.setdefault(key, empty)

    def flag(name, default=None):
        return args[args.index(name) + 1] if name in args else default

    def jq(expression, value):
        # gh api --jq: the filter run by jq itself; strings print raw, anything else as JSON (gh's --jq output).
        return "\n".join(r if isinstance(r, str) else json.dumps(r)
                         for r in jq_library.compile(expression).input_value(value).all())

    def rules_of(body):
        # "Create or update an environment" body -> "Get an environment" protection_rules.
        rules = [{"type": "wait_timer", "wait_timer": body["wait_timer"]}] if "wait_timer" in body else []
        if "reviewers" in body:
            rules.append({"type": "required_reviewers", "prevent_self_review": body.get("prevent_self_review", False),
                          "reviewers": [{"type": r["type"], "reviewer": {"id": r["id"]}} for r in body["reviewers"]]})
        return rules

    verb = " ".join(a for a in args[:4] if not a.startswith("-"))
    if tool == "az":
        cloud["calls"].append(f"az {verb}")
    elif args[0] == "api":
        cloud["calls"].append(f"gh {flag('--method', 'GET')} " + next(a for a in args[1:] if a.startswith("repos/")))
    else:
        cloud["calls"].append("gh " + " ".join(args[:2]))
    out, fail, code = "", None, 1
    if tool == "gh" and args[0] == "variable":
        cloud["variables"][args[2]] = flag("--body")
    elif tool == "gh":
        where = next(a for a in args[1:] if a.startswith("repos/"))
        method = flag("--method", "GET")
        parts = where.split("/")  # repos, owner, name, environments, env[, deployment-branch-policies[, id]]
        env = cloud["environments"].get(parts[4])
        if len(parts) == 5 and method == "GET":
            if env is None:
                fail = "gh: Not Found (HTTP 404)"
            else:
                out = jq(flag("--jq"), {"name": parts[4], "deployment_branch_policy": env["policy"],
                                        "protection_rules": env.get("rules", [])})
        elif len(parts) == 5 and method == "PUT":
            body = json.loads(stdin)
            if cloud.get("plan") == "free-private":
                fail = "gh: Not Found (HTTP 404)"  # no environments on this plan
            else:
                # A PUT replaces the environment's protection: what the body omits is gone (the REST docs say no
                # otherwise, so the script must not count on GitHub keeping it).
                env = cloud["environments"].setdefault(parts[4], {"policy": None, "branch_policies": []})
                env["policy"] = body["deployment_branch_policy"]
                env["rules"] = rules_of(body)
        elif env is None or not (env["policy"] or {}).get("custom_branch_policies"):
            fail = "gh: Not Found (HTTP 404)"  # the policies endpoints need custom_branch_policies
        elif method == "GET":
            out = jq(flag("--jq"), {"branch_policies": env["branch_policies"]})
        elif method == "POST":
            fields = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "-f")
            env["branch_policies"].append({"id": 100 + len(cloud["calls"]), "name": fields["name"],
                                           "type": fields["type"]})
        elif method == "DELETE":
            env["branch_policies"] = [b for b in env["branch_policies"] if str(b["id"]) != parts[6]]
    elif verb.startswith("account show"):
        out = "tenant-1" if "tenantId" in args else "sub-1"
    elif verb.startswith(("provider register", "feature register")):
        pass
    elif verb.startswith("feature show"):
        out = "Registered"
    elif verb.startswith("ad app list"):
        out = cloud["apps"].get(flag("--display-name"), "")
    elif verb.startswith("ad app create"):
        out = cloud["apps"][flag("--display-name")] = "app-" + flag("--display-name")
    elif verb.startswith("ad sp list"):
        out = cloud["sps"].get(flag("--filter").split("'")[1], "")
    elif verb.startswith("ad sp create"):
        out = cloud["sps"][flag("--id")] = "sp-" + flag("--id")
    elif verb.startswith("ad app federated-credential list"):
        creds = cloud["creds"].get(flag("--id"), {})
        if flag("--query") == "[].name":
            out = "\n".join(creds)
        else:
            name = flag("--query").split("'")[1]
            out = name if name in creds else ""
    elif verb.startswith("ad app federated-credential create"):
        body = json.loads(flag("--parameters"))
        creds = cloud["creds"].setdefault(flag("--id"), {})
        if body["name"] in creds:
            fail = "FederatedIdentityCredential with name " + body["name"] + " already exists"
        elif len(creds) >= 20:
            fail = "FederatedIdentityCredential limit of 20 per application reached"
        creds[body["name"]] = body["subject"]
    elif verb.startswith("ad app federated-credential update"):
        cloud["creds"][flag("--id")][flag("--federated-credential-id")] = json.loads(flag("--parameters"))["subject"]
    elif verb.startswith("ad app federated-credential delete"):
        del cloud["creds"][flag("--id")][flag("--federated-credential-id")]
    elif verb.startswith("role assignment list"):
        # By principal id in the query, nothing asked of Graph: a principal not replicated yet lists as none.
        query = re.fullmatch(r"\[\?principalId=='([^']+)'\]\.join\('\|', \[id, condition \|\| ''\]\)", flag("--query"))
        assert query and "--assignee" not in args and flag("--fill-principal-name") == "false", args
        key = [query[1], flag("--role"), flag("--scope")]
        if cloud.get("old_cli"):
            fail, code = "ERROR: unrecognized arguments: --fill-principal-name false", 2  # the CLI's parser: exit 2
        elif cloud.get("list_failures", 0):
            cloud["list_failures"] -= 1
            fail = "(TooManyRequests) The request is being throttled."
        else:
            out = "\n".join(f"{r[4]}|{r[3] or ''}" for r in cloud["roles"] if r[:3] == key)
    elif verb.startswith("role assignment delete"):
        cloud["roles"] = [r for r in cloud["roles"] if r[4] != flag("--ids")]
    elif verb.startswith("role assignment create"):
        key = [flag("--assignee-object-id"), flag("--role"), flag("--scope")]
        if key[0] is None or flag("--assignee-principal-type") != "ServicePrincipal":
            fail = "PrincipalNotFound: a new principal is found by object id and type only"
        elif key in [r[:3] for r in cloud["roles"]]:
            fail = "RoleAssignmentExists: The role assignment already exists."
        cloud["roles"].append([*key, flag("--condition"), f"/assignments/{len(cloud['calls'])}"])
    elif verb.startswith(("storage account show", "keyvault show")):
        out = "/subscriptions/sub-1/resourceGroups/rg-state/providers/x/" + flag("--name")
    else:
        fail = "fake az does not know: " + verb
    path.write_text(json.dumps(cloud))
    return (code, "", fail + "\n") if fail else (0, out + "\n", "")


_CLOUD = threading.Lock()
"""One call at a time answers from the cloud's file."""


def _fake_tool(tool: str, cloud: Path, args: list[str], stdin: str) -> dict[str, object]:
    """``_fake_answer`` as the fake az and gh answer a call (tests/fake_cli.py ``shim``): each call of the script's is
    still a process of its own, with its arguments, stdin, stdout, stderr and exit status, but a shell script's, not a
    Python interpreter's (each of those cost 25 ms of CPU, the setup makes a hundred calls)."""
    with _CLOUD:  # a fault of the stand-in fails the call with its traceback (tests/fake_cli.py)
        code, out, err = _fake_answer(tool, args, stdin, cloud)
    return {"exit": code, "stdout": out, "stderr": err}


def _fake_tools(folder: Path) -> dict[str, str]:
    for tool in ("az", "gh"):  # gh api --input - reads the request's body from stdin
        shim(folder, tool, functools.partial(_fake_tool, tool, folder / "cloud.json"), stdin_after="--input")
    (folder / "sleep").write_text("#!/bin/sh\n")  # the script's retries wait no time here
    (folder / "sleep").chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def _run_setup(tmp_path: Path, *flags: str, prefix: str = "repo:acme@123/infra@456") -> dict:
    """Print the setup script, run it against the fake tools in ``tmp_path``, return the cloud after."""
    result = command("ops", "ci-setup", "--repo", "acme/infra", "--sub-prefix", prefix, *BACKEND, *flags)
    assert result.returncode == 0, result.stderr
    (tmp_path / "setup.sh").write_text(result.stdout)
    done = subprocess.run(["bash", str(tmp_path / "setup.sh")], env=_fake_tools(tmp_path), capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    return json.loads((tmp_path / "cloud.json").read_text())


DEPLOY, PREVIEW = "sp-app-aksgpu-ci-acme-infra", "sp-app-aksgpu-ci-acme-infra-preview"
WRITES = ("create", "delete", "gh PUT", "gh POST", "gh DELETE")
"""Calls that change something (a credential's update writes what it holds, by design)."""


def test_the_setup_script_is_lint_clean_and_running_it_twice_changes_nothing_the_second_time(tmp_path):
    """Round-4 newcomer #9: the printed script made an app on every run while the docs said to run it again. Round-4
    Azure audit #14: it assigned roles to an app id a fresh principal may not resolve to yet. Run against a fake az
    that refuses both (ARM: RoleAssignmentExists; troubleshooting: a new principal by object id and type only)."""
    result = command("ops", "ci-setup", "--repo", "acme/infra", "--sub-prefix", "repo:acme@123/infra@456", *BACKEND)
    lint = subprocess.run([venv_tool("shellcheck"), "--shell=bash", "-"], input=result.stdout, capture_output=True,
                          text=True)
    assert lint.returncode == 0, lint.stdout
    first = _run_setup(tmp_path)
    cloud = _run_setup(tmp_path)
    creates = [c for c in first["calls"] if c.endswith("create")]
    second = cloud["calls"][len(first["calls"]):]
    assert creates and not [c for c in second if any(w in c for w in WRITES)], second
    assert cloud["apps"] == {"aksgpu-ci-acme-infra": "app-aksgpu-ci-acme-infra",
                             "aksgpu-ci-acme-infra-preview": "app-aksgpu-ci-acme-infra-preview"}
    roles = {(p, r): c for p, r, _, c, _ in cloud["roles"]}
    assert set(roles) == {(DEPLOY, "Contributor"), (DEPLOY, "Role Based Access Control Administrator"),
                          (DEPLOY, "Storage Blob Data Contributor"), (DEPLOY, "Key Vault Crypto User"),
                          *((PREVIEW, r) for r in ci_setup.PREVIEW_ROLES), (PREVIEW, "Storage Blob Data Reader"),
                          (PREVIEW, "Key Vault Crypto User")}
    assert roles[DEPLOY, "Role Based Access Control Administrator"] == assignable_condition()
    assert set(cloud["creds"]["app-aksgpu-ci-acme-infra-preview"]) == {"pull-request"}
    assert cloud["variables"]["AZURE_CLIENT_ID"] == "app-aksgpu-ci-acme-infra"
    assert cloud["variables"]["AZURE_PREVIEW_CLIENT_ID"] == "app-aksgpu-ci-acme-infra-preview"
    assert cloud["variables"]["AZURE_DEPLOY_PRINCIPAL_ID"] == DEPLOY
    assert cloud["variables"]["PULUMI_SECRETS_PROVIDER"] == "azurekeyvault://kv-acme.vault.azure.net/keys/pulumi"


def test_the_preview_app_reads_inside_the_clusters_and_cannot_write_there():
    """Round-4 Azure/CI audit (issue 33b) #1: the preview app held AKS RBAC Cluster Admin on the subscription, so a
    pull request's code was cluster-admin on every cluster (Secrets, privileged pods, the workloads' identities).
    A preview needs no Kubernetes write: pulumi-kubernetes falls back to a client-side preview when the server-side
    dry run is Forbidden (provider/pkg/provider/provider.go, Create and Update), and the preflight asks a preview
    for read only (tests/test_preflight.py). Role ids from learn.microsoft.com/azure/role-based-access-control/
    built-in-roles/containers: AKS RBAC Reader reads no Secrets."""
    assert ci_setup.PREVIEW_ROLES["Azure Kubernetes Service RBAC Reader"] == "7f6c6a51-bcf8-42ba-9220-52d62157d7db"
    writers = {"b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b": "AKS RBAC Cluster Admin",
               "3498e952-d568-435e-9b2c-8d77e338d7f7": "AKS RBAC Admin",
               "a7ffa36f-339b-4b5c-8bdf-e2c188b2c0eb": "AKS RBAC Writer",
               "0ab0b1a8-8aac-4efd-b8c2-3ee1fb270be8": "AKS Cluster Admin Role (admin kubeconfig)",
               "b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
               "f58310d9-a9f6-439a-9e8d-f62e7b41a168": "Role Based Access Control Administrator"}
    assert not set(ci_setup.PREVIEW_ROLES.values()) & set(writers)
    assert not {"Contributor", *writers.values()} & set(ci_setup.PREVIEW_ROLES)


KUBERNETES_PREVIEW_FALLBACK = "4.1.0"
"""The pulumi-kubernetes release from which a preview whose server-side dry run is Forbidden shows the inputs
instead of failing: Create since PR #2522 ("fix: ensure CSA does not hit API Server for preview", CHANGELOG 4.1.0,
which answers issue #2521, filed against 4.0.3 and left open), Update since PR #2419 (provider/pkg/provider/
provider.go: `if req.GetPreview() && apierrors.IsForbidden(awaitErr)`); both unchanged in the provider's newest
source read (after 4.32.0). Helm releases render client-side in a preview and install nothing (helm_release.go)."""


def test_a_preview_as_aks_rbac_reader_writes_nothing_and_reads_no_secret(render_of, renders):
    """Final audit (RISK, pulumi/pulumi-kubernetes#2521): a preview as AKS RBAC Reader creates nothing, so each
    dry run of a create or update is Forbidden. The pinned provider answers that with the inputs (above); what would
    still fail is a read of what Reader may not read, Secrets (AKS RBAC Reader "does not allow viewing Secrets",
    built-in-roles/containers): a refresh reads every object of the stack, Secrets and Helm's
    release Secrets included, and a `get` reads one. So previews never refresh, and the program gets no object."""
    import re
    from importlib.metadata import version

    from packaging.version import Version
    assert Version(version("pulumi-kubernetes")) >= Version(KUBERNETES_PREVIEW_FALLBACK)
    workflow = (REPO_ROOT / ".github" / "workflows" / "pull-request.yml").read_text()
    steps = [step for job in yaml.safe_load(workflow)["jobs"].values() for step in job.get("steps", [])]
    previews = [s for s in steps if "pulumi/actions" in s.get("uses", "") and s["with"].get("command") == "preview"]
    assert previews and not [s for s in previews if s["with"].get("refresh") not in (None, False)]
    commands = re.findall(r"pulumi preview[^\n]*", workflow)
    assert commands and not [c for c in commands if re.search(r"\s(--refresh|-r)\b", c)]
    assert not [(stack, r) for stack in renders for r in render_of(stack).reads if r.startswith("kubernetes:")]


def test_an_upgraded_repository_keeps_no_trust_or_grant_of_the_earlier_setup(tmp_path):
    """Issue 33b audit #3 and #4: the earlier ci-setup gave its single app (now the deploy app, same name) a
    pull-request credential and one environment credential per stack, and an unconstrained RBAC Administrator;
    running the new script kept them all, so every same-repository pull request could still sign in as deploy.
    Credentials the workflows no longer produce go, and an RBAC Administrator whose condition is not the current one
    is replaced (also when components/azure/roles.py gains a role: the old condition would refuse it)."""
    app = "app-aksgpu-ci-acme-infra"
    earlier = {"apps": {"aksgpu-ci-acme-infra": app}, "sps": {app: DEPLOY},
               "creds": {app: {"pull-request": "repo:acme/infra:pull_request",
                               "main": "repo:acme/infra:ref:refs/heads/main",
                               # One per stack, as the earlier setup made them; a team with a dev and a prod
                               # stack per scenario: 18, and the new per-scenario ones beside them pass 20.
                               **{f"environment-{s}-{e}": f"repo:acme/infra:environment:{s}-{e}"
                                  for s in SCENARIOS for e in ("dev", "prod")}}},
               "roles": [[DEPLOY, "Role Based Access Control Administrator", "/subscriptions/sub-1", None, "/old/1"],
                         [DEPLOY, "Role Based Access Control Administrator", "/subscriptions/sub-1",
                          assignable_condition(PROGRAM_ROLES[:-1]), "/old/2"],
                         [DEPLOY, "Contributor", "/subscriptions/sub-1", None, "/old/3"]]}
    (tmp_path / "cloud.json").write_text(json.dumps(earlier))
    cloud = _run_setup(tmp_path, prefix="repo:acme/infra")
    expected = subjects(WORKFLOWS, "repo:acme/infra", SCENARIOS)
    assert cloud["creds"][app] == expected["deploy"]
    assert cloud["creds"]["app-aksgpu-ci-acme-infra-preview"] == expected["preview"]
    admin = [r for r in cloud["roles"] if r[1] == "Role Based Access Control Administrator"]
    assert [(r[3], r[4].startswith("/old/")) for r in admin] == [(assignable_condition(), False)]
    assert [r[4] for r in cloud["roles"] if r[1] == "Contributor" and r[0] == DEPLOY] == ["/old/3"]  # kept as it is


def test_each_scenario_environment_deploys_from_main_only(tmp_path):
    """Issue 33b audit #2: an environment's token subject names no branch, and GitHub creates an environment a
    workflow names, unprotected ("Managing environments for deployment": "will not have any protection rules");
    a same-repository branch could then run a job in it and sign in as the deploy app. The script creates each
    scenario's environment with a custom deployment branch policy (REST "Create or update an environment",
    deployment_branch_policy {protected_branches: false, custom_branch_policies: true}) naming main only
    ("Create a deployment branch policy": name, type branch), and fixes ones that allow more."""
    other = SCENARIOS[1]
    earlier = {"environments": {
        SCENARIOS[0]: {"policy": None, "branch_policies": []},  # made by a workflow run: any branch
        other: {"policy": {"protected_branches": False, "custom_branch_policies": True},
                "branch_policies": [{"id": 7, "name": "feature/*", "type": "branch"},
                                    {"id": 8, "name": "main", "type": "branch"},
                                    {"id": 9, "name": "v*", "type": "tag"}]}}}
    (tmp_path / "cloud.json").write_text(json.dumps(earlier))
    first = _run_setup(tmp_path)
    assert set(first["environments"]) == set(SCENARIOS) == set(ci_setup.environments_of(
        identities(WORKFLOWS, "repo:acme/infra", SCENARIOS)))
    for name, env in first["environments"].items():
        assert env["policy"] == ci_setup.BRANCH_POLICY, name
        assert [(b["type"], b["name"]) for b in env["branch_policies"]] == [("branch", "main")], name
    assert first["environments"][other]["branch_policies"][0]["id"] == 8  # the one that was right stays
    cloud = _run_setup(tmp_path)
    assert not [c for c in cloud["calls"][len(first["calls"]):] if c.startswith(("gh PUT", "gh POST", "gh DELETE"))]
    script = command("ops", "ci-setup", "--repo", "acme/infra", "--sub-prefix", "repo:acme/infra", *BACKEND).stdout
    assert script.index("\nenvironment ") < script.index("\ncredential ")  # locked before anything trusts it


def test_an_infiniband_feature_that_never_registers_stops_the_script_saying_its_state(tmp_path):
    """Issue 33b audit #9: `until ... = Registered; do sleep 30` waited forever on a registration left Pending."""
    text = command("ops", "ci-setup", "--repo", "acme/infra", *BACKEND, "--sub-prefix", "repo:acme/infra").stdout
    loop = text[text.index("deadline="):text.index("done\n", text.index("deadline=")) + 5]
    fake = tmp_path / "az"
    fake.write_text("#!/bin/sh\necho Pending\n")
    fake.chmod(0o755)
    # SECONDS moves on by the deadline at each sleep: the loop must end on its own.
    done = subprocess.run(["bash", "-c", f"set -euo pipefail\nsleep() {{ SECONDS=$((SECONDS + 600)); }}\n{loop}"],
                          env={**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"},
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert f"AKSInfinibandSupport is still Pending after {ci_setup.FEATURE_WAIT_MINUTES} minutes" in done.stderr
    assert "AKSInfinibandSupport: Pending, waiting" in done.stdout


def test_a_credential_whose_subject_changed_is_updated_in_place(tmp_path):
    """A repository renamed, or moved to GitHub's immutable subjects: running the setup again with the new prefix
    updates each credential rather than failing on its name."""
    _run_setup(tmp_path, prefix="repo:acme/infra")
    creds = _run_setup(tmp_path, prefix="repo:acme@123/infra@456")["creds"]["app-aksgpu-ci-acme-infra"]
    assert creds["main"] == "repo:acme@123/infra@456:ref:refs/heads/main"


def test_a_subscription_with_infiniband_pools_registers_aks_infiniband_support():
    """Round-4 Azure audit #4: AKS use-amd-gpus ("Register the AKSInfinibandSupport feature") and
    Azure/aks-rdma-infiniband tests/setup-infra/deploy-aks.sh register it before an RDMA pool."""
    assert any(stack_config(s).addons.network_operator for s in stack_files())
    text = command("ops", "ci-setup", "--repo", "acme/infra", *BACKEND, "--sub-prefix", "repo:acme/infra").stdout
    assert "az feature register --namespace Microsoft.ContainerService --name AKSInfinibandSupport" in text
    assert text.index("az feature register") < text.index("az provider register --namespace "
                                                              "Microsoft.ContainerService --output none\n\n")


def test_a_setup_without_the_state_backend_is_refused_naming_what_is_missing():
    """Newcomer #6: the workflows log in to PULUMI_BACKEND_URL with PULUMI_SECRETS_PROVIDER; a script that sets
    neither leaves every run failing later, so the command refuses it."""
    result = command("ops", "ci-setup", "--repo", "acme/infra")
    assert result.returncode == 2
    assert "--state-account" in result.stderr and "--key-vault" in result.stderr and not result.stdout


def _run_failing(tmp_path: Path, cloud: dict) -> tuple[subprocess.CompletedProcess[str], dict]:
    """Run the setup script against ``cloud`` where it is meant to stop: its result and the cloud after."""
    (tmp_path / "cloud.json").write_text(json.dumps(cloud))
    script = command("ops", "ci-setup", "--repo", "acme/infra", "--sub-prefix", "repo:acme/infra", *BACKEND).stdout
    (tmp_path / "setup.sh").write_text(script)
    done = subprocess.run(["bash", str(tmp_path / "setup.sh")], env=_fake_tools(tmp_path), capture_output=True,
                          text=True)
    return done, json.loads((tmp_path / "cloud.json").read_text())


def test_a_failed_role_listing_is_retried_and_never_taken_for_no_assignment(tmp_path):
    """Final audit: `|| assignments=""` took a throttled or failed list for none, so the create that followed got
    RoleAssignmentExists and stopped the script (or an RBAC Administrator was replaced while a deploy ran). The list
    now asks nothing of Microsoft Graph (`--fill-principal-name false`, the principal id in the query), so a fresh
    principal lists as none without an error, and a failure is retried, then stops the script."""
    first = _run_setup(tmp_path)
    # The same conditions as ARM may return them: other case, other spacing.
    for r in first["roles"]:
        r[3] = r[3].upper().replace(" AND ", "  AND  ") if r[3] else r[3]
    (tmp_path / "cloud.json").write_text(json.dumps({**first, "list_failures": 3}))
    again = _run_setup(tmp_path)
    later = again["calls"][len(first["calls"]):]
    assert not [c for c in later if c.endswith(("role assignment create", "role assignment delete"))], later
    assert later.count("az role assignment list") == len([c for c in first["calls"]
                                                         if c == "az role assignment list"]) + 3
    done, cloud = _run_failing(tmp_path, {**again, "list_failures": 5})
    assert done.returncode == 1
    assert ("could not list the Contributor assignments on /subscriptions/sub-1 (tries: 5; az exit code 1: "
            "(TooManyRequests) The request is being throttled.), so nothing was changed for it") in done.stderr
    assert not [c for c in cloud["calls"][len(again["calls"]):] if c.endswith(("create", "delete"))]


def test_a_role_listing_the_azure_cli_refuses_is_not_retried_and_says_why(tmp_path):
    """Issue 33c audit #13: an Azure CLI without --fill-principal-name answers "unrecognized arguments", which five
    tries over 100 seconds cannot fix, and was then reported as a failed listing. The Azure CLI's exit codes
    (Azure/azure-cli README.md, "Exit codes": 1 an error, the server's included; 2 a parser error) tell them apart."""
    done, cloud = _run_failing(tmp_path, {"old_cli": True})
    assert done.returncode == 1 and cloud["calls"].count("az role assignment list") == 1
    assert ("could not list the Contributor assignments on /subscriptions/sub-1 (tries: 1; az exit code 2: ERROR: "
            "unrecognized arguments: --fill-principal-name false)") in done.stderr


def test_an_environment_keeps_its_reviewers_and_wait_timer_when_its_branch_policy_is_set(tmp_path):
    """Final audit: the environment PUT sent only deployment_branch_policy, and "Create or update an environment"
    does not say a PUT keeps what it omits (the stand-in GitHub drops it). Required reviewers are what
    deploy.yml asks teams to add; the script resends them, with the wait timer and self-review setting."""
    scenario = SCENARIOS[0]
    reviewed = {"policy": {"protected_branches": True, "custom_branch_policies": False}, "branch_policies": [],
                "rules": [{"type": "wait_timer", "wait_timer": 30},
                          {"type": "required_reviewers", "prevent_self_review": True,
                           "reviewers": [{"type": "User", "reviewer": {"id": 1}},
                                         {"type": "Team", "reviewer": {"id": 7}}]},
                          {"type": "branch_policy"}]}
    (tmp_path / "cloud.json").write_text(json.dumps({"environments": {scenario: reviewed}}))
    env = _run_setup(tmp_path)["environments"][scenario]
    assert env["policy"] == ci_setup.BRANCH_POLICY
    assert env["rules"] == reviewed["rules"][:2]


def test_a_repository_whose_plan_has_no_environments_stops_the_setup_before_any_credential_trusts_one(tmp_path):
    """Final audit: on a private repository on GitHub Free, environments and their branch policies are unavailable
    (docs.github.com, "Managing environments for deployment": "For access to environments, environment secrets, and
    deployment branches in private or internal repositories, you must use GitHub Pro, GitHub Team, or GitHub
    Enterprise"), so no environment can be kept to main: the script says so and stops, and no credential is made."""
    done, cloud = _run_failing(tmp_path, {"plan": "free-private"})
    assert done.returncode == 1
    assert "GitHub refused its deployment branch policy" in done.stderr
    assert "GitHub Pro, Team or Enterprise" in done.stderr
    assert not cloud["creds"] and not [c for c in cloud["calls"] if "federated-credential create" in c]


def test_a_reservation_group_shared_from_another_subscription_gets_the_grants_the_deploy_and_preflight_need(tmp_path):
    """Issue 33c audit #3: the program assigns the cluster identity Contributor on a reservation group's resource
    group (components/azure/cluster.py, use-capacity-reservation-groups), which for a group shared from another
    subscription (capacity-reservation-group-share) is in that subscription, where the deploy app's RBAC
    Administrator on its own subscription does not reach (403); and the preflight reads the group there. The setup
    grants RBAC Administrator on that resource group, constrained to Contributor for service principals, and Reader
    to both apps; a group in the deploying subscription needs nothing more."""
    other = "/subscriptions/22222222-2222-2222-2222-222222222222/resourceGroups/rg-reserved"
    same = "/subscriptions/SUB-1/resourceGroups/rg-local"  # the fake az's subscription, in other case
    apps = identities(WORKFLOWS, "repo:acme/infra", SCENARIOS)
    text = ci_setup.script("acme/infra", "repo:acme/infra", apps, "stacct", "kv-acme", reservations=[other, same])
    (tmp_path / "setup.sh").write_text(text)
    done = subprocess.run(["bash", str(tmp_path / "setup.sh")], env=_fake_tools(tmp_path), capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    cloud = json.loads((tmp_path / "cloud.json").read_text())
    there = {(p, r): c for p, r, scope, c, _ in cloud["roles"] if scope == other}
    assert there == {(DEPLOY, "Role Based Access Control Administrator"): assignable_condition((roles.CONTRIBUTOR,),
                                                                                                user_roles=()),
                     (DEPLOY, "Reader"): None, (PREVIEW, "Reader"): None}
    condition = there[DEPLOY, "Role Based Access Control Administrator"]
    assert _allows(condition, WRITE, roles.CONTRIBUTOR, "ServicePrincipal")
    assert not _allows(condition, WRITE, roles.ACR_PULL, "ServicePrincipal")
    assert not _allows(condition, DELETE, roles.CONTRIBUTOR, "User")
    assert not [r for r in cloud["roles"] if r[2] == same]
    lint = subprocess.run([venv_tool("shellcheck"), "--shell=bash", "-"], input=text, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout


def test_the_setup_reads_the_reservation_groups_of_the_stack_files(tmp_path):
    """Each resource group once, whatever its case, from every stack file's pools."""
    group = ("/subscriptions/22222222-2222-2222-2222-222222222222/resourceGroups/RG-Reserved/providers/"
             "Microsoft.Compute/capacityReservationGroups/crg-a100")
    a100 = {"name": "a100", "vmSize": "Standard_NC24ads_A100_v4", "priority": "regular", "maxCount": 2,
            "zones": ["1"], "capacityReservationGroup": group}
    files = {}
    for stack in ("one", "two"):
        files[stack] = tmp_path / f"Pulumi.{stack}.yaml"
        files[stack].write_text(yaml.safe_dump({"config": {"aksgpu:gpuPools": [a100], "aksgpu:cluster": {
            "openApiServer": True}}}))
    files["plain"] = tmp_path / "Pulumi.plain.yaml"
    files["plain"].write_text(yaml.safe_dump({"config": {"aksgpu:cluster": {"openApiServer": True}}}))
    assert ci_setup.reservation_scopes(files) == [group.split("/providers/")[0]]
