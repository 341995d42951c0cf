"""A stack file is read whole: every key is the project's, a provider setting the program reads, or one line naming
it (with the key that was meant); a key written twice, a file in another encoding or a folder are one line too; the
editor's JSON Schema refuses what the loader refuses; credentials are never printed back."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from pydantic.alias_generators import to_camel

from offline.docs import STACK_FILE_SCHEMA
from offline.stack_files import REPO_ROOT, stack_config
from program.config.errors import ConfigError, masked, redact
from program.config.foreign import OVERRIDDEN, PROVIDER_SETTINGS, read_namespaces
from program.config.keys import SECRET
from program.sdk import other_values
from tests.helpers import STACKS

BASE = {"aksgpu:cluster": {"openApiServer": True}}
"""What every stack file here has, so that its one mistake is the only problem."""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "Pulumi.t.yaml"
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as e:
        stack_config("t", path)
    return [str(p) for p in e.value.problems]


def schema_errors(document: dict) -> list[str]:
    schema = json.loads((REPO_ROOT / STACK_FILE_SCHEMA).read_text())
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(document)]


KEYS = [
    # (config keys besides BASE; the key the one error names, or None where the file is right; text of the error)
    ({"owner": "my-team"}, "owner", "a key without a namespace, which nothing reads; did you mean aksgpu:owner?"),
    ({"gpuPools": [{"name": "h100", "vmSize": "Standard_NC40ads_H100_v5"}]}, "gpuPools",
     "did you mean aksgpu:gpuPools?"),
    ({"locaton": "westeurope"}, "locaton", "did you mean aksgpu:location?"),
    ({"azure-native:location": "westeurope"}, "azure-native:location",
     "the program never uses it: aksgpu:location decides; did you mean aksgpu:location?"),
    ({"aksgpus:owner": "me"}, "aksgpus:owner", "not this program's namespace; did you mean aksgpu:owner?"),
    ({"azure-native:subscriptionID": "x"}, "azure-native:subscriptionID",
     "not a setting of the azure-native provider; did you mean azure-native:subscriptionId?"),
    ({"kubernetes:context": "aks-dev"}, "kubernetes:context",
     "nothing in this program reads the kubernetes namespace; it reads azure-native"),
    ({"pulumi:disable-default-providers": ["*"]}, "pulumi:disable-default-providers",
     "nothing in this program reads the pulumi namespace"),
    ({"aksgpu:build": {"mode": "acr"}, "docker:host": "unix:///var/run/docker.sock"}, "docker:host",
     "the docker provider runs only for a stack that builds its images with the local Docker engine "
     "(aksgpu:build.mode: local, the default), and this stack sets acr"),
    ({"azure-native:clientSecret": "not-in-a-stack-file"}, "azure-native:clientSecret",
     "a credential in plain text; set it with `pulumi config set --secret azure-native:clientSecret` or in the "
     "environment (ARM_CLIENT_SECRET)"),
    ({"aksgpu:location": "eastuss"}, "aksgpu:location", "not an Azure region name; did you mean eastus?"),
    ({"aksgpu:location": "West Europe"}, "aksgpu:location", "did you mean westeurope?"),
    ({"azure-native:subscriptionId": "00000000-0000-0000-0000-000000000000", "azure-native:useOidc": True,
      "azure-native:clientSecret": {"secure": "v1:c2VjcmV0"}, "aksgpu:location": "swedencentral"}, None, ""),
    ({"docker:host": "ssh://builder@10.0.0.4"}, None, ""),
]


@pytest.mark.parametrize("keys, key, text", KEYS, ids=[next(iter(k)) + (" ok" if key is None else "")
                                                      for k, key, _ in KEYS])
def test_every_key_is_the_projects_a_providers_or_one_line_naming_it_and_the_schema_agrees(tmp_path, keys, key,
                                                                                            text):
    document = {"config": {**BASE, **keys}}
    path = write(tmp_path, yaml.safe_dump(document))
    if key is None:
        stack_config("t", path)
        assert schema_errors(document) == []
        return
    lines = problems(path)
    assert len(lines) == 1 and lines[0].startswith(f"invalid config {key}=") and text in lines[0], lines
    assert schema_errors(document), "the JSON Schema accepts what the loader refuses"


def test_the_newcomers_file_names_each_key_it_wrote_and_nothing_it_did_not(tmp_path):
    """newcomer.md friction #1: rendered, exit 0, as a T4 pool in eastus owned by `unassigned`."""
    path = write(tmp_path, "config:\n  owner: my-team\n  location: westeurope\n  gpuPools:\n    - name: h100\n"
                           "      vmSize: Standard_NC40ads_H100_v5\n  azure-native:location: westeurope\n")
    assert [line.split("=")[0] for line in problems(path)] == [
        "invalid config owner", "invalid config location", "invalid config gpuPools",
        "invalid config azure-native:location"]


def test_a_project_key_outside_its_namespace_is_reported_alone_not_the_defaults_it_left(tmp_path):
    """Without its section the batch stack would be blamed for storage it never wrote."""
    path = write(tmp_path, yaml.safe_dump({"config": {**BASE, "aksgpu:scenario": "batch-inference",
                                                      "storage": {"accounts": []}}}))
    assert [line.split("=")[0] for line in problems(path)] == ["invalid config storage"]


def test_keys_above_config_are_named_where_the_config_line_is_missing(tmp_path):
    document = {"aksgpu:owner": "me", "aksgpu:location": "westeurope"}
    lines = problems(write(tmp_path, yaml.safe_dump(document, sort_keys=False)))
    assert lines == ['invalid config aksgpu:owner="me": is at the top level of Pulumi.t.yaml; keys go under config: '
                     "(is its line missing?)",
                     'invalid config aksgpu:location="westeurope": is at the top level of Pulumi.t.yaml; keys go '
                     "under config: (is its line missing?)"]
    assert schema_errors(document)
    assert "allowed at the top level: config, environment" in problems(write(tmp_path, "confg:\n  x: 1\n"))[0]


@pytest.mark.parametrize("text, line", [
    ("config:\n  aksgpu:gpuPools:\n    - name: t4\n      maxCount: 2\n      maxCount: 3\n", "key maxCount is written "
     "twice, on lines 4 and 5; keep one"),
    ("config:\n  aksgpu:addons:\n    keda: false\n  aksgpu:owner: me\n  aksgpu:addons:\n    kueue: false\n",
     "key aksgpu:addons is written twice, on lines 2 and 5; keep one"),
])
def test_a_key_written_twice_is_an_error_naming_it_and_both_lines(tmp_path, text, line):
    (found,) = problems(write(tmp_path, text))
    assert found.startswith("Pulumi.t.yaml:") and line in found


def test_a_base_mapping_merged_in_and_then_overridden_is_no_duplicate(tmp_path):
    path = write(tmp_path, "config:\n  aksgpu:cluster:\n    openApiServer: true\n  aksgpu:gpuPools:\n"
                           "    - &t4 {name: t4, maxCount: 1}\n    - <<: *t4\n      name: t4b\n")
    assert [p.name for p in stack_config("t", path).gpu_pools] == ["t4", "t4b"]


def test_a_file_that_is_not_utf8_or_not_a_file_is_one_line(tmp_path):
    path = tmp_path / "Pulumi.t.yaml"
    path.write_bytes("config:\n  aksgpu:owner: café\n".encode("latin-1"))
    assert problems(path) == ["Pulumi.t.yaml:2: byte 0xe9 is not UTF-8 text; save the file as UTF-8"]
    assert problems(tmp_path) == [f"{tmp_path}: is a folder, not a stack file"]


def test_no_credential_is_printed_back_under_any_key(tmp_path):
    token = "ghp_" + "a1B2c3D4e5" * 4
    storage_key = "Zm9v" * 21 + "YmE="
    path = write(tmp_path, yaml.safe_dump({"config": {
        **BASE, "aksgpu:githubToken": "short", "aksgpu:notes": f"token {token}",
        "aksgpu:storage": {"accounts": [{"role": "in", "apiKey": "k"}]}, "aksgpu:connection":
            f"DefaultEndpointsProtocol=https;AccountName=x;AccountKey={storage_key};EndpointSuffix=core.windows.net",
        "aksgpu:owner": {"password": "hunter2"}}}))
    text = "\n".join(problems(path))
    for secret in ("short", token, storage_key, "hunter2", '"k"'):
        assert secret not in text
    assert 'aksgpu:githubToken="<hidden, 5 characters>"' in text and "AccountKey=<hidden, 88 characters>" in text


@pytest.mark.parametrize("value, shown", [
    ("https://acct.blob.core.windows.net/c?sv=2022-11-02&sig=Ab%2Bcd&se=2026", "sig=<hidden, 7 characters>"),
    ("https://deployer:p4ss@registry.example/x", "https://deployer:<hidden, 4 characters>@registry.example/x"),
    ("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZXBvOmEvYiJ9.c2lnbmF0dXJl", "<hidden, 58 characters>"),
    ("abc8Q~" + "x" * 34, "<hidden, 40 characters>"),
    ("pul-" + "0123456789abcdef" * 2 + "01234567", "<hidden, 44 characters>"),
    # Issue 35 audit NIT, each shape from its source's own pattern (program/config/errors.py cites them):
    ("0123456789abcdef" * 2, "<hidden, 32 characters>"),  # a legacy Azure AI services key (SEC000/002)
    ("A1b2" * 13 + "JQQJ99aBc3D4e5F6g7H8AAAAACOGx9Y8", "<hidden, 84 characters>"),  # today's (SEC101/205)
    ("abcdefghijklmnopqrstuvwxyz234567" + "abcdefghijklmnopqrst", "<hidden, 52 characters>"),  # ADO PAT (SEC101/102)
    ("glpat-" + "aB3_x" * 4, "<hidden, 26 characters>"),  # GitLab (detect-secrets gitlab_token.py)
    ("glpat-" + "aB3_x" * 6 + ".01abcdefg", "<hidden, 46 characters>"),  # a routable one (gitleaks gitlab-pat-routable)
    ("AIza" + "SyA1b2C3d4E5f6G7h8I9j0K_-lMnOpQrStU", "<hidden, 39 characters>"),  # Google (gitleaks gcp-api-key)
    ("https://hooks.slack.com/services/T0A1B2C3D/B4E5F6G7H/aBcDeFgHiJkLmNoPqRsTuVwX",  # detect-secrets slack.py
     "https://hooks.slack.com/services/<hidden, 44 characters>"),
])
def test_credential_shaped_text_is_hidden_wherever_it_appears(value, shown):
    said = redact(f"got {value} here")
    assert shown in said and value not in said and said.startswith("got ") and said.endswith(" here")


@pytest.mark.parametrize("value", [
    "989aa7980e4cf806f80c7fef2b1adb7bc71aa306",  # a commit: the llm section pins models by it
    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Network/"
    "virtualNetworks/vnetHub01",
    "Standard_ND96isr_H100_v5", "aksgpu:cluster.maintenanceWindow.durationHours", "Europe/Paris",
    "sha256:" + "0123456789abcdef" * 4, "00000000-0000-0000-0000-000000000000",  # an image digest, a subscription
    "https://hooks.slack.com/services/", "glpat-short",
])
def test_what_names_a_resource_or_a_key_is_not_taken_for_a_credential(value):
    assert redact(value) == value and masked(value, "aksgpu:llm.revision") == value


def test_the_program_sees_the_keys_outside_its_namespace_with_secrets_hidden():
    """Under `pulumi up` the CLI hands every key over, secrets decrypted: the same check runs on them."""
    from pulumi.runtime.config import set_all_config
    set_all_config({"aksgpu:owner": "me", "azure-native:location": "westeurope", "azure-native:clientSecret": "s3"},
                   ["azure-native:clientSecret"])
    try:
        assert other_values("aksgpu", SECRET) == {"azure-native:location": "westeurope",
                                                  "azure-native:clientSecret": SECRET}
    finally:
        set_all_config({}, [])


@pytest.mark.parametrize("package, namespace", [("pulumi_azure_native", "azure-native"), ("pulumi_docker", "docker")])
def test_the_provider_settings_are_what_the_pinned_sdks_read(package, namespace):
    import importlib
    config = importlib.import_module(f"{package}.config")
    getattr(config, "host" if namespace == "docker" else "client_id")  # the SDK loads its config module on first use
    exported = vars(type(sys.modules[f"{package}.config"]))
    settings = {to_camel(name) for name, member in exported.items() if isinstance(member, property)}
    overridden = {key.split(":")[1] for key in OVERRIDDEN if key.startswith(f"{namespace}:")}
    assert PROVIDER_SETTINGS[namespace] | overridden == settings


@pytest.mark.parametrize("stack", STACKS)
def test_the_namespaces_read_are_those_of_the_default_providers_the_stack_uses(render_of, stack):
    """A provider the program passes explicitly (Kubernetes') reads nothing from the stack file; one it leaves to
    Pulumi's default (Azure's, Docker's for a local build) does. pulumi-command and pulumi-random have no settings."""
    r = render_of(stack)
    defaults = {x.type.split(":")[0] for x in r.resources if x.custom and x.provider is None} - {"pulumi"}
    assert defaults - {"command", "random"} == read_namespaces(r.cfg.build.mode == "local")



def test_every_committed_stack_name_follows_the_one_pattern_the_commands_take():
    from program.config.naming import stack_name_error
    assert [s for s in STACKS if stack_name_error(s)] == []
