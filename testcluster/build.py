#!/usr/bin/env python3
"""Build the test cluster's binaries from the pinned Go modules in this folder, once per version set.

Four module graphs, never merged (see README.md): ``controlplane/`` (k8s.io/kubernetes with its staging modules
replaced by their published tags, and the etcd server Kubernetes pins), ``kwok/``, ``kueue/`` and ``jobset/``
(each requires only its upstream module, so its graph is the one upstream's CI builds). Each folder's
go.mod/go.sum pin every module by hash.

Binaries land in a cache folder keyed on what goes into them (the folder's go.mod and go.sum, the Go release,
GOOS/GOARCH, the flags), named after the upstream version, e.g. ``controlplane-v1.34.12-<key>/``. A folder that
exists is reused as it is, so CI can cache the whole cache folder. The cache folder is ``$TESTCLUSTER_CACHE``, or
``$XDG_CACHE_HOME/aksgpu-testcluster`` (``~/.cache/aksgpu-testcluster``). Go's own caches (GOMODCACHE, GOCACHE)
are whatever ``go env`` says; set them to cache those too.

The same run renders what the controllers need from their module's ``config/`` folder with the built kubectl's
kustomize (Kueue's and JobSet's CRDs and webhook configurations) and copies KWOK's stage files, so a started
cluster reads nothing from the module cache.

Usage: ``python3 testcluster/build.py [--force] [--json]``; from Python, ``build.ensure_built()`` returns a
:class:`Layout` with every path.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Bump when the way a folder is built changes (flags, files written), so old cache folders are not reused.
RECIPE = "1"


@dataclass(frozen=True)
class Component:
    name: str  # folder under testcluster/ with the go.mod and go.sum
    module: str  # the upstream module whose version names the cache folder
    binaries: dict[str, str]  # binary name -> main package
    ldflags: object = None  # (versions: dict[module, info]) -> list of -X flags


def _k8s_ldflags(info: dict) -> list[str]:
    """What hack/lib/version.sh sets, so /version reports e.g. v1.34.12 (Kueue parses it as semver)."""
    k = info["k8s.io/kubernetes"]
    major, minor = re.match(r"v(\d+)\.(\d+)\.", k["Version"]).groups()
    values = {"gitVersion": k["Version"], "gitMajor": major, "gitMinor": minor, "gitCommit": k["Commit"],
              "gitTreeState": "clean", "buildDate": k["Time"]}
    flags = [f"-X {pkg}.{key}={value}" for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
             for key, value in values.items()]
    etcd = info["go.etcd.io/etcd/server/v3"]
    return flags + ([f"-X go.etcd.io/etcd/api/v3/version.GitSHA={etcd['Commit'][:7]}"] if etcd["Commit"] else [])


def _version_pkg_ldflags(module: str, pkg: str):
    """Kueue's and JobSet's Makefiles set GitVersion/GitCommit (and BuildDate) in their pkg/version."""
    def flags(info: dict) -> list[str]:
        m = info[module]
        return [f"-X {pkg}.GitVersion={m['Version']}", f"-X {pkg}.GitCommit={m['Commit']}",
                f"-X {pkg}.BuildDate={m['Time']}"]
    return flags


COMPONENTS = (
    Component("controlplane", "k8s.io/kubernetes", {
        "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
        "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
        "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
        "kubectl": "k8s.io/kubernetes/cmd/kubectl",
        "etcd": "go.etcd.io/etcd/server/v3",  # etcd's own package main (server/main.go -> etcdmain.Main)
    }, _k8s_ldflags),
    # kwok's version is a constant in its source (pkg/consts.Version), so it needs no flag.
    Component("kwok", "sigs.k8s.io/kwok", {"kwok": "sigs.k8s.io/kwok/cmd/kwok"}),
    Component("kueue", "sigs.k8s.io/kueue", {"kueue": "sigs.k8s.io/kueue/cmd/kueue"},
              _version_pkg_ldflags("sigs.k8s.io/kueue", "sigs.k8s.io/kueue/pkg/version")),
    Component("jobset", "sigs.k8s.io/jobset", {"jobset": "sigs.k8s.io/jobset"},
              _version_pkg_ldflags("sigs.k8s.io/jobset", "sigs.k8s.io/jobset/pkg/version")),
)
# Extra modules whose version/commit a component's flags need, besides its own.
EXTRA_MODULES = {"controlplane": ("go.etcd.io/etcd/server/v3",)}
# KWOK's stage files, the set kwokctl itself loads (pkg/kwokctl/runtime/cluster.go, getDefault*Stages, with leases).
KWOK_STAGES = ("kustomize/stage/node/fast/node-initialize.yaml",
               "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
               "kustomize/stage/pod/fast/pod-ready.yaml",
               "kustomize/stage/pod/fast/pod-complete.yaml",
               "kustomize/stage/pod/fast/pod-delete.yaml")


@dataclass
class Layout:
    """Where everything is once built: binaries by name, rendered manifests, versions."""
    bin: dict[str, Path] = field(default_factory=dict)
    kueue_manifests: Path | None = None
    jobset_manifests: Path | None = None
    kwok_stages: Path | None = None
    versions: dict[str, str] = field(default_factory=dict)
    dirs: dict[str, Path] = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"bin": {k: str(v) for k, v in self.bin.items()}, "kueue_manifests": str(self.kueue_manifests),
                "jobset_manifests": str(self.jobset_manifests), "kwok_stages": str(self.kwok_stages),
                "versions": self.versions, "dirs": {k: str(v) for k, v in self.dirs.items()}}


def cache_root() -> Path:
    if os.environ.get("TESTCLUSTER_CACHE"):
        return Path(os.environ["TESTCLUSTER_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "aksgpu-testcluster"


def _go_env() -> dict:
    return dict(os.environ, CGO_ENABLED="0", GOWORK="off")


def _run(cmd: list[str], cwd: Path, env: dict, nice: int, capture: bool = True) -> str:
    def lower_priority():
        if nice:
            os.nice(nice)
    proc = subprocess.run(cmd, cwd=cwd, env=env, preexec_fn=lower_priority, text=True,
                          stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE if capture else None)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} (in {cwd}) failed with {proc.returncode}:\n{proc.stderr or ''}")
    return proc.stdout or ""


def _required_version(gomod: str, module: str) -> str:
    m = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", gomod, re.M)
    if not m:
        raise RuntimeError(f"{module} is not required in go.mod")
    return m.group(1)


def _module_info(module: str, version: str, cwd: Path, env: dict, nice: int) -> dict:
    """Version, release time, commit (from the proxy's Origin) and module-cache folder of module@version."""
    raw = json.loads(_run(["go", "mod", "download", "-json", f"{module}@{version}"], cwd, env, nice))
    if raw.get("Error"):
        raise RuntimeError(f"{module}@{version}: {raw['Error']}")
    # The proxy's .info names the tag's commit in Origin for most modules; not for some (etcd's server/v3.6.4).
    commit = (raw.get("Origin") or {}).get("Hash") or \
        (json.loads(Path(raw["Info"]).read_text()).get("Origin") or {}).get("Hash", "")
    t = raw.get("Time") or json.loads(Path(raw["Info"]).read_text())["Time"]
    return {"Version": version, "Time": t.replace(".000Z", "Z"), "Commit": commit, "Dir": raw["Dir"]}


@contextlib.contextmanager
def _lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _key(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


def _publish(tmp: Path, final: Path) -> None:
    try:
        tmp.rename(final)
    except OSError:  # someone else published the same key first
        shutil.rmtree(tmp, ignore_errors=True)


def _build_component(c: Component, root: Path, env: dict, goversion: str, nice: int, force: bool,
                     log) -> tuple[Path, dict]:
    src = HERE / c.name
    gomod, gosum = (src / "go.mod").read_text(), (src / "go.sum").read_bytes()
    version = _required_version(gomod, c.module)
    base_flags = ["-trimpath", "-buildvcs=false"]
    key = _key(RECIPE, c.name, gomod, gosum, goversion, json.dumps(base_flags))
    final = root / f"{c.name}-{version}-{key}"
    with _lock(root / f".{c.name}.lock"):
        if final.is_dir() and not force:
            return final, json.loads((final / "BUILD.json").read_text())
        infos = {m: _module_info(m, _required_version(gomod, m), src, env, nice)
                 for m in (c.module, *EXTRA_MODULES.get(c.name, ()))}
        ldflags = "-s -w" + "".join(" " + f for f in (c.ldflags(infos) if c.ldflags else []))
        tmp = Path(tempfile.mkdtemp(prefix=f".{c.name}-", dir=root))
        started = time.monotonic()
        log(f"building {c.name} {version} ({', '.join(c.binaries)}) into {final}")
        pkgs = list(c.binaries.values())
        _run(["go", "build", *base_flags, "-ldflags", ldflags, "-o", str(tmp) + "/", *pkgs], src, env, nice,
             capture=False)
        for name, pkg in c.binaries.items():  # go build names a binary after its package path's last element
            built = tmp / re.sub(r"/v\d+$", "", pkg).rsplit("/", 1)[-1]
            if built.name != name:
                built.rename(tmp / name)
        meta = {"component": c.name, "version": version, "key": key, "go": goversion, "ldflags": ldflags,
                "modules": {m: {k: v for k, v in i.items() if k != "Dir"} for m, i in infos.items()},
                "seconds": round(time.monotonic() - started, 1)}
        (tmp / "BUILD.json").write_text(json.dumps(meta, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        _publish(tmp, final)
        return final, meta


def _render_manifests(root: Path, kubectl: Path, metas: dict, env: dict, nice: int, force: bool, log) -> Path:
    """Kueue's and JobSet's config/default rendered by kustomize, and KWOK's stages, from their module zips."""
    versions = {c.name: metas[c.name]["version"] for c in COMPONENTS}
    key = _key(RECIPE, json.dumps(versions, sort_keys=True), metas["controlplane"]["key"])
    final = root / f"manifests-{key}"
    with _lock(root / ".manifests.lock"):
        if final.is_dir() and not force:
            return final
        tmp = Path(tempfile.mkdtemp(prefix=".manifests-", dir=root))
        log(f"rendering Kueue/JobSet config/default and KWOK stages into {final}")
        for name, module in (("kueue", "sigs.k8s.io/kueue"), ("jobset", "sigs.k8s.io/jobset")):
            d = _module_info(module, versions[name], HERE / name, env, nice)["Dir"]
            out = _run([str(kubectl), "kustomize", str(Path(d) / "config" / "default")], HERE, env, nice)
            (tmp / f"{name}.yaml").write_text(out)
        d = Path(_module_info("sigs.k8s.io/kwok", versions["kwok"], HERE / "kwok", env, nice)["Dir"])
        (tmp / "kwok-stages.yaml").write_text("".join((d / f).read_text().rstrip("\n") + "\n---\n"
                                                      for f in KWOK_STAGES))
        (tmp / "VERSIONS.json").write_text(json.dumps(versions, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        _publish(tmp, final)
        return final


def ensure_built(force: bool = False, nice: int | None = None, log=None) -> Layout:
    """Build (or reuse) every component; return where the binaries and rendered manifests are."""
    log = log or (lambda msg: print(f"[testcluster.build] {msg}", file=sys.stderr, flush=True))
    nice = int(os.environ.get("TESTCLUSTER_NICE", "10")) if nice is None else nice
    if shutil.which("go") is None:
        raise RuntimeError("Go is required to build the test cluster (https://go.dev/dl/, 1.26 or newer)")
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    env = _go_env()
    goversion = _run(["go", "env", "GOVERSION", "GOOS", "GOARCH"], HERE / "controlplane", env, 0).split()
    goversion = "/".join(goversion)
    layout, metas = Layout(), {}
    for c in COMPONENTS:
        d, meta = _build_component(c, root, env, goversion, nice, force, log)
        metas[c.name] = meta
        layout.dirs[c.name] = d
        layout.versions[c.name] = meta["version"]
        for name in c.binaries:
            layout.bin[name] = d / name
    if "go.etcd.io/etcd/server/v3" in metas["controlplane"]["modules"]:
        layout.versions["etcd"] = metas["controlplane"]["modules"]["go.etcd.io/etcd/server/v3"]["Version"]
    m = _render_manifests(root, layout.bin["kubectl"], metas, env, nice, force, log)
    layout.dirs["manifests"] = m
    layout.kueue_manifests, layout.jobset_manifests = m / "kueue.yaml", m / "jobset.yaml"
    layout.kwok_stages = m / "kwok-stages.yaml"
    return layout


def regen_controlplane(version: str, nice: int = 10, log=print) -> None:
    """Rewrite controlplane/go.mod and go.sum for another k8s.io/kubernetes release (e.g. v1.36.3).

    ``go install k8s.io/kubernetes/cmd/...@vX`` is refused (its go.mod replaces every staging module with
    ./staging/...), and requiring it fails on the staging modules' v0.0.0. So: replace each staging module its
    go.mod lists with the published tag v0.<minor>.<patch>, copy its go and godebug lines (only the main
    module's count), add the binaries as tools, and take etcd's server at the version Kubernetes' graph pins."""
    d, env = HERE / "controlplane", _go_env()
    info = json.loads(_run(["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"], d, env, nice))
    upstream = Path(info["GoMod"]).read_text()
    staging = re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", upstream, re.M)
    tag = "v0." + version.split(".", 1)[1]
    go_line = re.search(r"^go (\S+)", upstream, re.M).group(1)
    godebug = re.findall(r"^godebug (\S+)", upstream, re.M)
    lines = ["module aksgpu.test/testcluster/controlplane", "", f"go {go_line}", ""]
    lines += [f"godebug {g}" for g in godebug] + [""]
    lines += [f"replace {m} => {m} {tag}" for m in staging]
    (d / "go.mod").write_text("\n".join(lines) + "\n")
    (d / "go.sum").write_text("")
    log(f"{len(staging)} staging modules replaced by {tag}")
    cp = COMPONENTS[0]
    _run(["go", "get", "-tool", *(f"{p}@{version}" for n, p in cp.binaries.items() if n != "etcd")], d, env, nice)
    etcd = _run(["go", "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/server/v3"], d, env, nice).strip()
    _run(["go", "get", "-tool", f"go.etcd.io/etcd/server/v3@{etcd}"], d, env, nice)
    _run(["go", "mod", "tidy"], d, env, nice)
    log(f"controlplane/go.mod now builds k8s.io/kubernetes {version} with etcd {etcd}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--force", action="store_true", help="rebuild even when the cache folder exists")
    p.add_argument("--nice", type=int, default=None, help="niceness for go (default $TESTCLUSTER_NICE or 10)")
    p.add_argument("--json", action="store_true", help="print the layout as JSON")
    p.add_argument("--regen-controlplane", metavar="VERSION",
                   help="rewrite controlplane/go.mod+go.sum for this k8s.io/kubernetes version, then stop")
    args = p.parse_args(argv)
    if args.regen_controlplane:
        regen_controlplane(args.regen_controlplane, nice=10 if args.nice is None else args.nice)
        return 0
    layout = ensure_built(force=args.force, nice=args.nice)
    if args.json:
        print(json.dumps(layout.as_json(), indent=2))
    else:
        for name, path in sorted(layout.bin.items()):
            print(f"{name:24} {path}")
        print(f"{'manifests':24} {layout.dirs['manifests']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
