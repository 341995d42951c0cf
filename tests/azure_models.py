"""Check Azure resource inputs against Microsoft's generated ARM models of the API versions the program sends.

pulumi-azure-native 3.29.0 sends each resource type at one API version (its docstrings say which); the
``azure-mgmt-*`` packages pinned in pyproject.toml's dev group carry AutoRest models generated from the same REST specs
for those versions. Their ``_attribute_map`` gives every property (Python names follow the specs'
x-ms-client-name, as Pulumi's input names do), ``_validation`` the required, read-only, pattern, length and range
rules, the ``__init__`` annotations the enum of a string property, and the operations' URL serialisation the name
rules of path parameters (``agentPoolName``, ``registryName``...). A wrong enum, name pattern, unknown or read-only
property then fails a test instead of a deploy.
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import re
import tokenize
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

# Pulumi type → (models package at the API version pulumi-azure-native 3.29.0 uses, model, path parameters).
ARM_TYPES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "azure-native:containerservice:ManagedCluster": (  # 2025-09-01
        "azure.mgmt.containerservice", "ManagedCluster", ("resourceGroupName", "resourceName")),
    "azure-native:containerservice:AgentPool": (  # 2025-09-01
        "azure.mgmt.containerservice", "AgentPool", ("resourceGroupName", "resourceName", "agentPoolName")),
    "azure-native:containerservice:MaintenanceConfiguration": (  # 2025-09-01
        "azure.mgmt.containerservice", "MaintenanceConfiguration", ("resourceGroupName", "resourceName", "configName")),
    "azure-native:containerregistry:Registry": (
        "azure.mgmt.containerregistry.v2023_01_01_preview", "Registry", ("resourceGroupName", "registryName")),
    "azure-native:storage:StorageAccount": (
        "azure.mgmt.storage.v2024_01_01", "StorageAccountCreateParameters", ("resourceGroupName", "accountName")),
    "azure-native:storage:BlobContainer": (
        "azure.mgmt.storage.v2024_01_01", "BlobContainer", ("resourceGroupName", "accountName", "containerName")),
    "azure-native:storage:BlobServiceProperties": (
        "azure.mgmt.storage.v2024_01_01", "BlobServiceProperties",
        ("resourceGroupName", "accountName", "blobServicesName")),
    "azure-native:authorization:RoleAssignment": (
        "azure.mgmt.authorization.v2022_04_01", "RoleAssignmentCreateParameters", ("scope", "roleAssignmentName")),
    "azure-native:network:VirtualNetwork": (  # 2024-05-01
        "azure.mgmt.network", "VirtualNetwork", ("resourceGroupName", "virtualNetworkName")),
    "azure-native:network:Subnet": (
        "azure.mgmt.network", "Subnet", ("resourceGroupName", "virtualNetworkName", "subnetName")),
    "azure-native:network:VirtualNetworkPeering": (
        "azure.mgmt.network", "VirtualNetworkPeering",
        ("resourceGroupName", "virtualNetworkName", "virtualNetworkPeeringName")),
    "azure-native:network:PrivateEndpoint": (
        "azure.mgmt.network", "PrivateEndpoint", ("resourceGroupName", "privateEndpointName")),
    "azure-native:network:PrivateDnsZoneGroup": (
        "azure.mgmt.network", "PrivateDnsZoneGroup",
        ("resourceGroupName", "privateEndpointName", "privateDnsZoneGroupName")),
    "azure-native:privatedns:PrivateZone": (  # 2024-06-01
        "azure.mgmt.privatedns", "PrivateZone", ("resourceGroupName", "privateZoneName")),
    "azure-native:privatedns:VirtualNetworkLink": (
        "azure.mgmt.privatedns", "VirtualNetworkLink",
        ("resourceGroupName", "privateZoneName", "virtualNetworkLinkName")),
    # Sent at 2024-03-01; the nearest generated models are 2024-11-01, whose ResourceGroup is the same.
    "azure-native:managedidentity:UserAssignedIdentity": (
        "azure.mgmt.msi.v2023_01_31", "Identity", ("resourceGroupName", "resourceName")),
    "azure-native:managedidentity:FederatedIdentityCredential": (
        "azure.mgmt.msi.v2023_01_31", "FederatedIdentityCredential",
        ("resourceGroupName", "resourceName", "federatedIdentityCredentialResourceName")),
    "azure-native:monitor:AzureMonitorWorkspace": (  # sends 2023-04-03; nearest published model 2021-06-03-preview
        "azure.mgmt.monitor.v2021_06_03_preview", "AzureMonitorWorkspaceResource",
        ("resourceGroupName", "azureMonitorWorkspaceName")),
    "azure-native:monitor:DataCollectionEndpoint": (
        "azure.mgmt.monitor.v2022_06_01", "DataCollectionEndpointResource",
        ("resourceGroupName", "dataCollectionEndpointName")),
    "azure-native:monitor:DataCollectionRule": (
        "azure.mgmt.monitor.v2022_06_01", "DataCollectionRuleResource",
        ("resourceGroupName", "dataCollectionRuleName")),
    "azure-native:monitor:DataCollectionRuleAssociation": (
        "azure.mgmt.monitor.v2022_06_01", "DataCollectionRuleAssociationProxyOnlyResource",
        ("resourceUri", "associationName")),
    "azure-native:monitor:ActionGroup": (  # sends 2024-10-01-preview; nearest published model 2023-01-01
        "azure.mgmt.monitor.v2023_01_01", "ActionGroupResource", ("resourceGroupName", "actionGroupName")),
    "azure-native:monitor:DiagnosticSetting": (
        "azure.mgmt.monitor.v2021_05_01_preview", "DiagnosticSettingsResource", ("resourceUri", "name")),
    "azure-native:dashboard:Grafana": (  # sends 2024-10-01; nearest published model 2023-09-01
        "azure.mgmt.dashboard", "ManagedGrafana", ("resourceGroupName", "workspaceName")),
    "azure-native:operationalinsights:Workspace": (  # sends 2023-09-01; nearest published model 2025-07-01
        "azure.mgmt.loganalytics", "Workspace", ("resourceGroupName", "workspaceName")),
    "azure-native:resources:ResourceGroup": (
        "azure.mgmt.resource.resources.v2024_11_01", "ResourceGroup", ("resourceGroupName",)),
}
RESPONSE_MODELS = {"azure-native:storage:StorageAccount": "StorageAccount",
                   "azure-native:authorization:RoleAssignment": "RoleAssignment"}
"""Where Azure answers with another model than the request's."""
NEWER_ENUM_VALUES = {
    "KnownDataFlowStreams": {"Microsoft-PrometheusMetrics": "the stream of managed Prometheus, added to this "
                             "extensible enum after the 2022-06-01 spec; Azure/prometheus-collector's "
                             "AddonBicepTemplate sends it to dataCollectionRules@2022-06-01"},
}
"""Values of extensible (``modelAsString``) enums that Azure accepts at the version sent but the published model
predates, each with its evidence. Every other value must be one the model lists."""
NO_PUBLISHED_MODEL = {
    "azure-native:alertsmanagement:PrometheusRuleGroup":
        "no azure-mgmt package models Microsoft.AlertsManagement/prometheusRuleGroups; tests/test_monitoring.py "
        "checks its inputs against the REST spec's rules (2023-03-01: one scope, at most 20 rules, severity 0-4)",
}
"""ARM types without a Python model at any version: checked by a dedicated test instead."""
PRIMITIVES = {"str": str, "int": int, "long": int, "bool": bool, "float": (int, float), "iso-8601": str,
              "duration": str, "date": str, "object": object, "bytearray": str, "base64": str}


@dataclass
class Report:
    violations: list[str] = field(default_factory=list)
    values: int = 0
    enums: int = 0

    def add(self, path: str, problem: str) -> None:
        self.violations.append(f"{path}: {problem}")


def _normal(name: str) -> str:
    return name.replace("_", "").lower()


@cache
def models(package: str) -> ModuleType:
    return importlib.import_module(f"{package}.models")


_URL_CALL = re.compile(r'"(\w+)": (_SERIALIZER\.url\()')


def _call_source(text: str, start: int) -> str:
    """The source of the call that opens at ``start`` (``_SERIALIZER.url(...)``), found with the tokenizer so a
    ``)`` inside a pattern string does not end it."""
    depth = 0
    lines = text[start:start + 2000].splitlines(keepends=True)  # a url() call is a few lines
    for token in tokenize.generate_tokens(iter(lines).__next__):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
            if depth == 0:
                row, col = token.end
                return "".join(lines[:row - 1]) + lines[row - 1][:col]
    raise ValueError(f"unbalanced call at {start}")


@cache
def _file_path_rules(source: Path) -> dict[str, list[dict[str, Any]]]:
    """Each URL parameter's rules in one operations file: only the small ``_SERIALIZER.url(...)`` calls are
    parsed (parsing whole files took seconds)."""
    rules: dict[str, list[dict[str, Any]]] = {}
    text = source.read_text()
    for match in _URL_CALL.finditer(text):
        call = ast.parse(_call_source(text, match.start(2)), mode="eval").body
        rule = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords
                if kw.arg in ("max_length", "min_length", "pattern")}
        rules.setdefault(match[1], []).append(rule)
    return rules


@cache
def path_rules(package: str, params: tuple[str, ...]) -> dict[str, list[dict[str, Any]]]:
    """URL parameter name → its serialisation rules, read from the package's operations source: the files that
    serialise the resource's own name parameters (azure.mgmt.network has a hundred files; parsing all is slow)."""
    own = [p for p in params if p != "resourceGroupName"] or list(params)
    folder = Path(importlib.import_module(package).__file__).parent / "operations"
    rules: dict[str, list[dict[str, Any]]] = {}
    for source in sorted(folder.glob("*.py")):
        if any(f'"{param}": _SERIALIZER.url(' in source.read_text() for param in own):
            for key, found in _file_path_rules(source).items():
                if key in params:
                    rules.setdefault(key, []).extend(found)
    return rules


def _enum_of(model: type, attribute: str, module: ModuleType) -> type[enum.Enum] | None:
    """The x-ms-enum of a string property, named in the model's ``__init__`` annotation."""
    annotation = str(inspect.signature(model.__init__).parameters.get(attribute, inspect.Parameter(
        attribute, inspect.Parameter.KEYWORD_ONLY)).annotation)
    match = re.search(r"_models\.(\w+)", annotation)
    candidate = getattr(module, match[1], None) if match else None
    return candidate if isinstance(candidate, type) and issubclass(candidate, enum.Enum) else None


def _check_rules(value: Any, rules: dict[str, Any], path: str, report: Report) -> None:
    if isinstance(value, str):
        if "pattern" in rules and not re.search(rules["pattern"], value):
            report.add(path, f"{value!r} does not match {rules['pattern']}")
        if "max_length" in rules and len(value) > rules["max_length"]:
            report.add(path, f"{value!r} is longer than {rules['max_length']}")
        if "min_length" in rules and len(value) < rules["min_length"]:
            report.add(path, f"{value!r} is shorter than {rules['min_length']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "maximum" in rules and value > rules["maximum"]:
            report.add(path, f"{value} is above {rules['maximum']}")
        if "minimum" in rules and value < rules["minimum"]:
            report.add(path, f"{value} is below {rules['minimum']}")
    if isinstance(value, list):
        if "max_items" in rules and len(value) > rules["max_items"]:
            report.add(path, f"{len(value)} items, at most {rules['max_items']}")
        if "min_items" in rules and len(value) < rules["min_items"]:
            report.add(path, f"{len(value)} items, at least {rules['min_items']}")


def check_value(value: Any, type_name: str, module: ModuleType, path: str, report: Report,
                enum_type: type[enum.Enum] | None = None, response: bool = False) -> None:
    report.values += 1
    if value is None:
        return
    if type_name.startswith("[") and type_name.endswith("]"):
        if not isinstance(value, list):
            report.add(path, f"must be a list of {type_name[1:-1]}")
            return
        for i, item in enumerate(value):
            check_value(item, type_name[1:-1], module, f"{path}[{i}]", report, enum_type, response)
        return
    if type_name.startswith("{") and type_name.endswith("}"):
        if not isinstance(value, dict):
            report.add(path, f"must be a map of {type_name[1:-1]}")
            return
        for key, item in value.items():
            check_value(item, type_name[1:-1], module, f"{path}.{key}", report, enum_type, response)
        return
    if type_name in PRIMITIVES:
        expected = PRIMITIVES[type_name]
        if expected is not object and (not isinstance(value, expected) or
                                       (expected is not bool and isinstance(value, bool))):
            report.add(path, f"{value!r} is not {type_name}")
        elif enum_type is not None and isinstance(value, str):
            report.enums += 1
            allowed = {m.value.lower() for m in enum_type} | {v.lower() for v in NEWER_ENUM_VALUES.get(
                enum_type.__name__, {})}
            if value.lower() not in allowed:
                report.add(path, f"{value!r} is not one of {sorted(m.value for m in enum_type)}")
        return
    check_model(value, getattr(module, type_name), module, path, report, response=response)


def check_model(value: Any, model: type, module: ModuleType, path: str, report: Report,
                skip: tuple[str, ...] = (), response: bool = False) -> None:
    """``value`` (camelCase keys, flattened as Pulumi sends them) against ``model`` and its nested models.

    ``response``: an answer of Azure (the mocks' outputs): read-only properties allowed, required ones not demanded.
    """
    if not isinstance(value, dict):
        report.add(path, f"must be an object ({model.__name__})")
        return
    subtypes = getattr(model, "_subtype_map", None) or {}
    for discriminator, options in subtypes.items():
        wire = model._attribute_map[discriminator]["key"].rsplit(".", 1)[-1]
        if value.get(wire) in options:
            model = getattr(module, options[value[wire]])
    attributes = model._attribute_map
    validation = getattr(model, "_validation", {})
    by_name: dict[str, str] = {}
    for attr, spec in attributes.items():
        by_name[_normal(attr)] = attr
        wire = _normal(spec["key"].rsplit(".", 1)[-1].replace("\\", ""))
        # A flattened property can share its name with a read-only envelope field (an agent pool's
        # `properties.type` and the resource's `type`): a request means the writable one.
        if wire not in by_name or validation.get(by_name[wire], {}).get("readonly"):
            by_name[wire] = attr
    present = set()
    for key, item in value.items():
        if key in skip:
            continue
        attr = by_name.get(_normal(key))
        where = f"{path}.{key}"
        if attr is None:
            report.add(where, f"{model.__name__} has no such property")
            continue
        present.add(attr)
        rules = validation.get(attr, {})
        if rules.get("readonly") and not response:
            report.add(where, "is read-only: Azure refuses it in a request")
            continue
        check_value(item, attributes[attr]["type"], module, where, report, _enum_of(model, attr, module), response)
        _check_rules(item, rules, where, report)
    if not response:
        for attr, rules in validation.items():
            wire = attributes[attr]["key"].rsplit(".", 1)[-1]
            if rules.get("required") and attr not in present and wire not in skip and \
                    not (subtypes and attr in subtypes):
                report.add(f"{path}.{wire}", f"required by {model.__name__}")


def check_resource(typ: str, name: str, inputs: dict[str, Any], report: Report, response: bool = False) -> None:
    """One resource's inputs (or, with ``response``, the mocks' outputs) against its ARM model."""
    package, model_name, path_params = ARM_TYPES[typ]
    module = models(package)
    for param in path_params:
        if param in inputs and not response:
            report.values += 1
            for rules in path_rules(package, path_params).get(param, []):
                _check_rules(inputs[param], rules, f"{name}.{param}", report)
    skip = path_params + (("id", "name", "type", "etag") if response else ())
    if response:
        model_name = RESPONSE_MODELS.get(typ, model_name)
    check_model(inputs, getattr(module, model_name), module, name, report, skip=skip, response=response)
