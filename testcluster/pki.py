"""Certificates for one test cluster, made with the openssl command (OpenSSL 3; Debian's ``openssl`` package).

Keys are ECDSA P-256 except the two that must be RSA 2048 (the service-account signing key, and the webhook
CA, see below); certs are valid for a year, in one folder per cluster run:

- ``ca``: the cluster CA; signs the API server's serving cert and the client certs (admin, KCM, scheduler).
- ``apiserver``: serving cert for 127.0.0.1, localhost and the ``kubernetes`` Service names and IP.
- ``admin`` (O=system:masters), ``kcm`` (CN=system:kube-controller-manager), ``scheduler``
  (CN=system:kube-scheduler): client certs, as kubeadm makes them.
- ``sa``: the service-account token signing key pair.
- ``webhook-ca``: trust anchor of Kueue's and JobSet's webhooks (the ``caBundle``). It carries the DNS name
  ``kueue-ca`` and a PKCS#1 key because Kueue's cert rotator (open-policy-agent/cert-controller) accepts a CA in
  its Secret only then (rotator.go: validCACert verifies the CA for DNS name CAName; ParsePKCS1PrivateKey).
- ``kueue-webhook``, ``jobset-webhook``: serving certs for 127.0.0.1 (the URL the API server calls) and the
  in-cluster Service name each controller expects.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

DAYS = "365"


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {proc.stderr.strip()}")


def _key(name: str, d: Path, rsa: bool = False) -> None:
    if rsa:  # -traditional writes PKCS#1 ("BEGIN RSA PRIVATE KEY")
        _openssl("genrsa", "-traditional", "-out", f"{name}.key", "2048", cwd=d)
    else:  # ECDSA P-256: ten times quicker to make than RSA on a busy 2-core machine
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key", cwd=d)


def _ca(name: str, cn: str, d: Path, dns: str | None = None, rsa: bool = False) -> None:
    _key(name, d, rsa)
    ext = ["-addext", "basicConstraints=critical,CA:TRUE",
           "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature,keyEncipherment"]
    if dns:
        ext += ["-addext", f"subjectAltName=DNS:{dns}"]
    _openssl("req", "-x509", "-new", "-key", f"{name}.key", "-subj", f"/CN={cn}", "-days", DAYS, "-sha256",
             *ext, "-out", f"{name}.crt", cwd=d)


def _leaf(name: str, subj: str, ca: str, d: Path, sans: list[str] | None = None, server: bool = False) -> None:
    _key(name, d)
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", subj, "-out", f"{name}.csr", cwd=d)
    usage = "serverAuth" if server else "clientAuth"
    ext = ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment",
           f"extendedKeyUsage={usage}"]
    if sans:
        ext.append("subjectAltName=" + ",".join(sans))
    (d / f"{name}.ext").write_text("\n".join(ext) + "\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-days", DAYS, "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)
    (d / f"{name}.csr").unlink()
    (d / f"{name}.ext").unlink()


def make(d: Path, service_ip: str, kueue_service: str, jobset_service: str) -> Path:
    """Write the cluster's certificates into ``d``; return ``d``."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the openssl command is required (Debian/Ubuntu: apt-get install openssl)")
    d.mkdir(parents=True, exist_ok=True)
    _ca("ca", "kubernetes-ca", d)
    _leaf("apiserver", "/CN=kube-apiserver", "ca", d, server=True, sans=[
        "IP:127.0.0.1", f"IP:{service_ip}", "DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local"])
    _leaf("admin", "/O=system:masters/CN=kubernetes-admin", "ca", d)
    _leaf("kcm", "/CN=system:kube-controller-manager", "ca", d)
    _leaf("scheduler", "/CN=system:kube-scheduler", "ca", d)
    _key("sa", d, rsa=True)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    _ca("webhook-ca", "kueue-ca", d, dns="kueue-ca", rsa=True)
    _leaf("kueue-webhook", "/CN=kueue-webhook", "webhook-ca", d, server=True,
          sans=["IP:127.0.0.1", "DNS:localhost", f"DNS:{kueue_service}"])
    _leaf("jobset-webhook", "/CN=jobset-webhook", "webhook-ca", d, server=True,
          sans=["IP:127.0.0.1", "DNS:localhost", f"DNS:{jobset_service}"])
    for f in d.glob("*.key"):
        f.chmod(0o600)
    return d
