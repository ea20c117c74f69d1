"""``lakelog configs`` (kafka-configs, for users' SCRAM credentials) and ``lakelog acls``
(kafka-acls), with Kafka's flags, run against the store directly: what they change is what
every agent of the store authenticates and authorizes with from its next request on."""

from __future__ import annotations

import argparse
import re
from typing import Any

from lakelog.cli.arguments import Out, open_store
from lakelog.engine.errors import InvalidConfigError

# kafka-configs' --add-config: MECHANISM=[key=value,...] entries, comma-separated.
_SCRAM_ENTRY = re.compile(r"(SCRAM-SHA-\d+)=\[([^\]]*)\]")


def parse_scram_configs(text: str) -> dict[str, dict[str, str]]:
    """``'SCRAM-SHA-512=[iterations=8192,password=x]'`` as ``{"SCRAM-SHA-512": {"iterations": "8192",
    "password": "x"}}``; raises InvalidConfigError naming what is not of that form (never the password)."""
    found: dict[str, dict[str, str]] = {}
    rest = _SCRAM_ENTRY.sub("", text).replace(",", "").strip()
    if rest or not _SCRAM_ENTRY.search(text):
        raise InvalidConfigError("--add-config must be MECHANISM=[iterations=N,password=P],... (SCRAM-SHA-256/512)")
    for mechanism, body in _SCRAM_ENTRY.findall(text):
        fields = dict(part.split("=", 1) for part in body.split(",") if "=" in part)
        unknown = set(fields) - {"iterations", "password", "salt"}
        if unknown or "password" not in fields:
            raise InvalidConfigError(f"{mechanism}: give password= (and iterations=), not {sorted(unknown)}")
        found[mechanism] = fields
    return found


def cmd_configs(args: argparse.Namespace, out: Out) -> None:
    from lakelog.engine.security.scram import CredentialStore, check_mechanism, make_credential

    if args.entity_type not in (None, "users"):
        raise InvalidConfigError(f"--entity-type {args.entity_type}: lakelog configs manages users only")
    actions = [a for a in ("alter", "describe") if getattr(args, a)]
    if len(actions) != 1:
        raise InvalidConfigError("give one of --alter, --describe")
    if args.alter and not args.entity_name:
        raise InvalidConfigError("--alter needs --entity-name")
    credentials = CredentialStore(open_store(args).uri)
    if args.alter:
        deletions = [check_mechanism(m.strip()) for d in args.delete_config or [] for m in d.split(",") if m.strip()]
        additions: dict[str, dict[str, str]] = {}
        for text in args.add_config or []:
            additions.update(parse_scram_configs(text))
        if not deletions and not additions:
            raise InvalidConfigError("--alter needs --add-config or --delete-config")
        for mechanism, fields in additions.items():
            iterations = int(fields.get("iterations", 4096))
            credentials.upsert(args.entity_name, make_credential(mechanism, fields["password"], iterations))
        for mechanism in deletions:
            credentials.delete(args.entity_name, mechanism)
        out(f"Completed updating config for user {args.entity_name}.")
        return
    users = credentials.users()
    names = [args.entity_name] if args.entity_name else sorted(users)
    for name in names:
        shown = ",".join(f"{m}=iterations={c.iterations}" for m, c in sorted(users.get(name, {}).items()))
        out(f"SCRAM credential configs for user-principal '{name}' are {shown}")


def _resources(args: argparse.Namespace) -> list[tuple[str, str]]:
    found = [("TOPIC", t) for t in args.topic or []]
    found += [("GROUP", g) for g in args.group or []]
    found += [("TRANSACTIONAL_ID", t) for t in args.transactional_id or []]
    if args.cluster:
        found.append(("CLUSTER", "kafka-cluster"))
    return found


def cmd_acls(args: argparse.Namespace, out: Out) -> None:
    from lakelog.engine.security.acls import AclBinding, AclFilter, AclStore

    actions = [a for a in ("add", "remove", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise InvalidConfigError("give one of --add, --remove, --list")
    pattern = args.resource_pattern_type.upper()
    acls = AclStore(open_store(args).uri)
    resources = _resources(args)
    if args.list:
        principal = args.principal
        shown = [
            b
            for b in acls.bindings()
            if (not resources or (b.resource_type, b.name) in resources)
            and (principal is None or b.principal == principal)
        ]
        _print(shown, out)
        return
    if not resources:
        raise InvalidConfigError("name a resource: --topic, --group, --transactional-id or --cluster")
    grants = [(p, "ALLOW", h) for p in args.allow_principal or [] for h in args.allow_host or ["*"]]
    grants += [(p, "DENY", h) for p in args.deny_principal or [] for h in args.deny_host or ["*"]]
    operations = args.operation or ["ALL"]
    if args.add:
        if not grants:
            raise InvalidConfigError("--add needs --allow-principal or --deny-principal")
        bindings = [
            AclBinding.of(rtype, name, pattern, principal, host, op, permission)
            for rtype, name in resources
            for principal, permission, host in grants
            for op in operations
        ]
        acls.add(bindings)
        out("Adding ACLs for resource(s):")
        _print(bindings, out)
        return
    removed = []
    for rtype, name in resources:
        for principal, permission, host in grants or [(None, "ANY", None)]:
            for op in args.operation or ["ANY"]:
                removed += acls.remove(
                    AclFilter(rtype, name, pattern, principal, host, op.upper().replace("-", "_"), permission)
                )
    out("Removed ACLs:")
    _print(removed, out)


def _print(bindings: list[Any], out: Out) -> None:
    by_resource: dict[tuple[str, str, str], list[Any]] = {}
    for b in bindings:
        by_resource.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
    for (rtype, name, pattern), group in sorted(by_resource.items()):
        out(f"Current ACLs for resource `ResourcePattern(resourceType={rtype}, name={name}, patternType={pattern})`:")
        for b in sorted(group, key=lambda b: (b.principal, b.operation, b.permission)):
            out(f"\t(principal={b.principal}, host={b.host}, operation={b.operation}, permissionType={b.permission})")


def add_parsers(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "configs",
        parents=parents,
        help="users' SCRAM credentials (kafka-configs --entity-type users), kept in the store",
    )
    p.add_argument("--alter", action="store_true")
    p.add_argument("--describe", action="store_true")
    p.add_argument("--entity-type", choices=["users"])
    p.add_argument("--entity-name")
    p.add_argument("--add-config", action="append", help="'SCRAM-SHA-512=[iterations=8192,password=...]'")
    p.add_argument("--delete-config", action="append", help="SCRAM-SHA-512 (the mechanism's credential)")
    p.set_defaults(func=cmd_configs)

    p = commands.add_parser("acls", parents=parents, help="ACLs every agent authorizes with (kafka-acls' flags)")
    for flag in ("--add", "--remove", "--list", "--cluster", "--force"):
        p.add_argument(flag, action="store_true")
    for flag in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host", "--operation"):
        p.add_argument(flag, action="append")
    for flag in ("--topic", "--group", "--transactional-id"):
        p.add_argument(flag, action="append")
    p.add_argument("--principal", help="--list: only this principal's ACLs")
    p.add_argument("--resource-pattern-type", default="literal", choices=["literal", "prefixed", "any", "match"])
    p.set_defaults(func=cmd_acls)
