"""Every `python -m offline` and `python -m ops` command, through the entry point a user runs (in this process, with
a bare environment: tests.helpers.command): a bad argument or input ends with exit status 2 and one line naming the
argument, the value and what is allowed, no traceback, credentials hidden, and nothing written (no stack file, no
regenerated docs, no render)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from offline.stack_files import REPO_ROOT
from tests.helpers import command

pytestmark = pytest.mark.xdist_group("cli")


def project_state() -> dict[str, str]:
    """What a command could write in the project: its top-level files and the generated docs, by content."""
    paths = [*REPO_ROOT.glob("*.*"), *REPO_ROOT.glob("docs/*.md"), *REPO_ROOT.glob("docs/*.json")]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


def run(tmp_path: Path, package: str, *argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    """``python -m PACKAGE ARGV`` in this process, with a bare environment (tests.helpers.command)."""
    return command(package, *argv, input=stdin, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})


@pytest.fixture
def files(tmp_path):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "latin1.yaml").write_bytes("config:\n  aksgpu:owner: café\n".encode("latin-1"))
    (tmp_path / "twice.yaml").write_text("config:\n  aksgpu:owner: a\n  aksgpu:owner: b\n")
    (tmp_path / "notjson").write_text("{steps: [")
    return tmp_path


SAS = "https://acct.blob.core.windows.net/state?sv=2022-11-02&sig=Zm9vYmFyYmF6cXV4"
CASES = [
    # (arguments, with {t} for the test's folder; text the one line must hold)
    ("offline render --stack ../x", "argument --stack: '../x' is not a stack name"),
    ("offline render --stack ''", "argument --stack: '' is not a stack name"),
    ("offline render --stack=..", "argument --stack: '..' is not a stack name: '.' and '..' name a folder itself"),
    # Pulumi's names may start with '-' (given as --stack=NAME): the name is looked up, not read as a flag.
    ("ops lifetime --stack=-sandbox", "no config file for stack '-sandbox' (expected Pulumi.-sandbox.yaml)"),
    ("offline render --stack devv", "no config file for stack 'devv' (expected Pulumi.devv.yaml); did you mean dev?"),
    ("offline render --stack dev --config {t}", "argument --config: '{t}' is a folder; a file is needed"),
    ("offline render --stack dev --config {t}/nope.yaml", "argument --config: '{t}/nope.yaml': no such file"),
    ("offline render --stack dev --config {t}/latin1.yaml", "latin1.yaml:2: byte 0xe9 is not UTF-8 text"),
    ("offline render --stack dev --config {t}/twice.yaml", "key aksgpu:owner is written twice, on lines 2 and 3"),
    ("offline render --stack dev --config /dev/null", "argument --config: '/dev/null' is not a regular file"),
    ("offline render --stack dev --out {t}/afile", "argument --out: '{t}/afile' is not a folder; a folder is needed"),
    ("offline render --stack dev --out {t}/afile/under", "'{t}/afile' is not a folder; a folder is needed"),
    ("offline render-diff {t}/afile {t}", "argument base: '{t}/afile' is not a folder; a folder is needed"),
    ("offline new-stack my_stack! --like dev", "argument name: 'my_stack!' is not a stack name"),
    ("offline new-stack 'my stack' --like dev", "argument name: 'my stack' is not a stack name"),
    ("offline new-stack '' --like dev", "argument name: '' is not a stack name"),
    ("offline new-stack ../outside --like dev", "argument name: '../outside' is not a stack name"),
    ("offline new-stack dev2 --like devv", "argument --like: no config file for stack 'devv'"),
    ("offline new-stack dev2 --like dev --lifetime forever", "argument --lifetime: invalid choice: 'forever'"),
    ("offline urns --stack -x", "argument --stack: expected one argument"),
    ("offline nothing", "argument COMMAND: invalid choice: 'nothing'"),
    ("ops lifetime --stack x/y", "argument --stack: 'x/y' is not a stack name"),
    ("ops capacity --stack dev --fail-on sometimes", "argument --fail-on: invalid choice: 'sometimes'"),
    ("ops catalogue --subscription s --regions eastus,eastuss", "argument --regions: 'eastuss' not an Azure "
                                                                "region name; did you mean eastus?"),
    (f"ops ci-setup --repo o/n --state-account '{SAS}'", "argument --state-account: 'https://acct.blob.core.windows."
                                                         "net/state?sv=2022-11-02&sig=<hidden, 16 characters>' must "
                                                         "be 3-24 lowercase letters and digits"),
    ("ops ci-setup --repo o/n --key-vault https://kv-state.vault.azure.net", "argument --key-vault: 'https://kv-state"
                                                                            ".vault.azure.net' must be a Key Vault "
                                                                            "name: 3-24 letters, digits and single "
                                                                            "hyphens"),
    ("ops ci-setup --repo o/n --key-vault kv--state", "must be a Key Vault name"),
    ("ops ci-setup --repo https://github.com/o/n --state-account stacme --key-vault kv-acme",
     "--repo 'https://github.com/o/n': expected OWNER/NAME"),
    ("ops push-targets dev", "argument stacks: 'dev' is not a JSON list of stack names"),
    ("ops push-targets '[\"devv\"]'", "argument stacks: no config file for stack 'devv'"),
    ("ops push-targets '[\"dev\"]'", "stdin (az group list --output json) is not JSON"),
    ("ops expired-stacks", "stdin (az group list --output json) is not JSON (Expecting value at line 1 column 1)"),
    ("ops matrix '[\"dev\"'", "argument '[\"dev\"' is not JSON"),
    ("ops e2e-matrix dev --max-cost ten", "argument --max-cost: --max-cost 'ten': expected US dollars a run may cost, "
                                          "a number above 0"),
    ("ops e2e-matrix dev --max-cost 0", "--max-cost '0': expected US dollars"),
    ("ops e2e-matrix dev,gpu-basic", "no config file for stack 'gpu-basic' (expected Pulumi.gpu-basic.yaml); did you "
                                    "mean gpu-basics?"),
    ("ops e2e-matrix dev", "stdin (az group list --output json) is not JSON"),
    ("ops preview-guard {t}/notjson", "{t}/notjson (pulumi preview --json) is not JSON"),
    ("ops preview-guard {t}/nope.json", "argument preview: '{t}/nope.json': no such file"),
]


@pytest.mark.parametrize("arguments, text", CASES, ids=[c for c, _ in CASES])
def test_a_bad_argument_is_one_line_exit_2_and_writes_nothing(files, arguments, text):
    import shlex
    before, tree = project_state(), sorted(p.name for p in files.rglob("*"))
    result = run(files, *shlex.split(arguments.format(t=files)), stdin="not json")
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and text.format(t=files) in line
    assert project_state() == before and sorted(p.name for p in files.rglob("*")) == tree


def test_a_token_pasted_under_an_unknown_key_is_never_printed(files):
    token = "ghp_" + "Zx9" * 12
    (files / "token.yaml").write_text(f"config:\n  aksgpu:cluster:\n    openApiServer: true\n  aksgpu:githubToken: "
                                      f"{token}\n  deploy:\n    password: hunter22\n")
    result = run(files, "offline", "render", "--stack", "dev", "--config", str(files / "token.yaml"),
                 "--out", str(files / "out"))
    assert result.returncode == 2 and token not in result.stderr and "hunter22" not in result.stderr
    assert 'aksgpu:githubToken="<hidden, 40 characters>"' in result.stderr
    assert '{"password": "<hidden, 8 characters>"}' in result.stderr and not (files / "out").exists()
