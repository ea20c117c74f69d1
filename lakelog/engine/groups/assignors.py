"""Kafka's consumer partition assignors as pure, deterministic functions.

A Kafka group leader runs the assignor named by ``partition.assignment.strategy``
over every member's subscription; lakelog has no broker and no leader, so any
process that rebalances a group computes the assignment itself. That only works
if every process computes the *same* assignment, so everything here is a pure
function of its arguments: no I/O, no clock, no randomness, and no dependence
on the order of ``subscriptions``, of a member's ``topics`` or ``owned``, of
``partition_counts``, or on Python's per-process string hashing. Ties are
broken by member id (range and roundrobin: by Kafka's ``MemberInfo`` order,
static members by ``group.instance.id`` first) and then by (topic, partition).

Strategies (``org.apache.kafka.clients.consumer`` as of Kafka 3.9, rack awareness left out):

* ``range`` -- ``RangeAssignor``: per topic, its subscribers in ``MemberInfo``
  order take consecutive ranges; the first ``partitions % subscribers`` take one
  more. Balanced per topic, not over topics.
* ``roundrobin`` -- ``RoundRobinAssignor``: all partitions of all subscribed
  topics in (topic, partition) order are dealt to the members in ``MemberInfo``
  order, skipping a member not subscribed to the partition's topic. Counts
  differ by at most one when all subscriptions are identical.
* ``sticky`` -- ``StickyAssignor`` (KIP-54, KIP-341) on
  ``internals.AbstractStickyAssignor``:

  - *balance*: when all members subscribe to the same topics, counts differ by
    at most one. Otherwise the assignment is as balanced as any can be: no
    member could give a partition to one with two fewer, not even through a
    chain of members each handing one on -- which makes the sum of squared
    counts the least possible (stronger than Kafka's own guarantee, which only
    rules out direct transfers).
  - *stickiness*: among the assignments balanced that way it keeps the most
    partitions with their current owners (so a member leaving moves only its
    own partitions when that keeps the balance, and a member joining takes only
    as many as balance requires).
  - *ownership claims* (KIP-341): a partition claimed by several members goes
    to the claim of the highest ``generation``; if that generation has more than
    one claim, nobody owns it. A claim for a topic the member no longer
    subscribes to, or for a partition that does not exist, is dropped.

  When all members subscribe to the same topics this follows Kafka's
  ``ConstrainedAssignmentBuilder`` step by step (keep up to the quota of owned
  partitions, then deal the rest round-robin to the members under quota, in
  member id order); otherwise it starts as Kafka's ``GeneralAssignmentBuilder``
  does (keep valid owned partitions, give the rest, topics with the fewest
  subscribers first, each to the least loaded subscriber) and then rebalances
  by moving partitions along chains of members and cancelling every exchange
  that would keep more owners -- an exact convex min-cost flow where Kafka uses
  heuristics, so the general case can differ from Kafka's output in which
  partitions move, never in being less balanced or less sticky.
* ``cooperative-sticky`` -- ``CooperativeStickyAssignor`` (KIP-429): the same
  target as ``sticky``; :func:`cooperative_round` splits reaching it into a
  round in which owners revoke the partitions that move and a round in which
  the new owners get them.

Deliberate differences from Kafka: member ids are compared by code point
(Java compares UTF-16 units; the two orders differ only between characters
beyond U+FFFF and U+E000-U+FFFF). KIP-341 conflicts are settled independently
of the order members are seen in (Kafka's outcome for three or more claimants
can depend on a ``HashMap``'s iteration order), and the general sticky path
does not use claims that lost to a newer generation as hints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from lakelog.engine.client_config import parse_strategy
from lakelog.engine.topics import TopicPartition


@dataclass(frozen=True)
class Subscription:
    """One member's JoinGroup metadata, as Kafka's ``ConsumerPartitionAssignor.Subscription`` carries it."""

    member_id: str
    topics: tuple[str, ...]  # subscribed topic names (a pattern is already resolved by the member)
    owned: tuple[TopicPartition, ...] = ()  # partitions the member currently owns (used by sticky assignors)
    generation: int = -1  # generation in which `owned` was assigned (a claim from an older generation loses)
    instance_id: str | None = None  # group.instance.id of a static member

    def __post_init__(self) -> None:
        # Callers build these from JSON and lists; tuples of TopicPartition keep the value hashable.
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(self, "owned", tuple(TopicPartition(t, p) for t, p in self.owned))


def is_cooperative(strategy: str) -> bool:
    """True for cooperative-sticky (KIP-429's protocol), False for the eager assignors."""
    return parse_strategy(strategy) == "cooperative-sticky"


def assign(
    strategy: str, subscriptions: Sequence[Subscription], partition_counts: Mapping[str, int]
) -> dict[str, tuple[TopicPartition, ...]]:
    """The assignment ``strategy`` gives the group of ``subscriptions`` over topics of ``partition_counts`` partitions.

    Every member id gets an entry (possibly empty), in member id order; each
    partition of a topic somebody subscribes to goes to exactly one of its
    subscribers; a topic missing from ``partition_counts`` has no partitions.
    Tuples are sorted by (topic, partition). The result depends only on the
    values given, not on the order of ``subscriptions``.
    """
    name = parse_strategy(strategy)
    members: dict[str, Subscription] = {}
    for sub in subscriptions:
        if sub.member_id in members:
            raise ValueError(f"member {sub.member_id!r} appears twice in the subscriptions")
        members[sub.member_id] = sub
    for topic, count in partition_counts.items():
        if count < 0:
            raise ValueError(f"topic {topic!r} has a negative partition count {count}")
    counts = {topic: count for topic, count in partition_counts.items() if count > 0}
    # Topics that do not exist (or have no partitions) are dropped from subscriptions, as Kafka's
    # AbstractPartitionAssignor does for topics missing from the metadata.
    topics = {m: frozenset(t for t in sub.topics if t in counts) for m, sub in members.items()}
    if name == "range":
        result = _range(members, topics, counts)
    elif name == "roundrobin":
        result = _roundrobin(members, topics, counts)
    else:
        result = _sticky(members, topics, counts)
    return {m: tuple(sorted(result[m])) for m in sorted(members)}


def cooperative_round(
    target: Mapping[str, Sequence[TopicPartition]], owned: Mapping[str, Sequence[TopicPartition]]
) -> tuple[dict[str, tuple[TopicPartition, ...]], dict[str, tuple[TopicPartition, ...]]]:
    """KIP-429's first round towards ``target``: ``(assignment_now, revoking)``.

    A member is assigned now the partitions of its target that no other member
    owns (the ones it keeps and the ones nobody owns), and revokes every
    partition it owns but is not assigned now. A partition moving from A to B
    is therefore in ``revoking[A]`` and assigned to nobody until a second round
    (with A's revocation done) gives it to B -- so a partition never has two
    owners at once. A partition claimed by several members is revoked by all of
    them first, as Kafka's ``CooperativeStickyAssignor`` treats doubly claimed
    partitions. A member absent from ``owned`` owns nothing; a member in
    ``owned`` but not in ``target`` (one that left) revokes everything it owns.
    ``assignment_now`` has the members of ``target``; ``revoking`` has the
    members of both, with empty tuples for those revoking nothing.
    """
    seen: dict[TopicPartition, str] = {}
    for member, tps in target.items():
        for tp in tps:
            other = seen.setdefault(tp, member)
            if other != member:
                raise ValueError(f"target assigns {tp} to both {other!r} and {member!r}")
    owners: dict[TopicPartition, set[str]] = {}
    for member, tps in owned.items():
        for tp in tps:
            owners.setdefault(tp, set()).add(member)
    now = {
        member: tuple(sorted({tp for tp in target[member] if owners.get(tp, set()) <= {member}}))
        for member in sorted(target)
    }
    revoking = {
        member: tuple(sorted(set(owned.get(member, ())) - set(now.get(member, ()))))
        for member in sorted(set(target) | set(owned))
    }
    return now, revoking


# -- range and roundrobin -----------------------------------------------------------------------------------------


def _member_info_key(sub: Subscription) -> tuple[int, str, str]:
    # AbstractPartitionAssignor.MemberInfo.compareTo: static members (by group.instance.id) before
    # dynamic ones (by member id). The member id breaks a tie between equal instance ids, which
    # Kafka leaves to HashMap order.
    if sub.instance_id is not None:
        return (0, sub.instance_id, sub.member_id)
    return (1, sub.member_id, "")


def _range(
    members: Mapping[str, Subscription], topics: Mapping[str, frozenset[str]], counts: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    ordered = [sub.member_id for sub in sorted(members.values(), key=_member_info_key)]
    result: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for topic in sorted(counts):
        subscribers = [m for m in ordered if topic in topics[m]]
        if not subscribers:
            continue
        per, extra = divmod(counts[topic], len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            n = per + (1 if i < extra else 0)
            result[member] += [TopicPartition(topic, p) for p in range(start, start + n)]
            start += n
    return result


def _roundrobin(
    members: Mapping[str, Subscription], topics: Mapping[str, frozenset[str]], counts: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    ordered = [sub.member_id for sub in sorted(members.values(), key=_member_info_key)]
    result: dict[str, list[TopicPartition]] = {m: [] for m in members}
    turn = 0
    for topic in sorted({t for ts in topics.values() for t in ts}):
        for p in range(counts[topic]):
            # Kafka's CircularIterator: skip members not subscribed to the topic; the one after the
            # taker is next in turn. A subscriber exists, since only subscribed topics are dealt.
            while topic not in topics[ordered[turn]]:
                turn = (turn + 1) % len(ordered)
            result[ordered[turn]].append(TopicPartition(topic, p))
            turn = (turn + 1) % len(ordered)
    return result


# -- sticky ---------------------------------------------------------------------------------------------------------


def _sticky(
    members: Mapping[str, Subscription], topics: Mapping[str, frozenset[str]], counts: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    if not members:
        return {}
    owner = _valid_owners(members, topics, counts)
    ordered = sorted(members)
    if len({topics[m] for m in ordered}) == 1:
        return _constrained(ordered, owner, sorted(topics[ordered[0]]), counts)
    return _General(ordered, topics, counts, owner).build()


def _valid_owners(
    members: Mapping[str, Subscription], topics: Mapping[str, frozenset[str]], counts: Mapping[str, int]
) -> dict[TopicPartition, str]:
    """Each existing partition's current owner after KIP-341's rule; partitions without one are left out."""
    claims: dict[TopicPartition, tuple[int, list[str]]] = {}
    for member, sub in members.items():
        for tp in set(sub.owned):
            if not 0 <= tp.partition < counts.get(tp.topic, 0):
                continue
            best = claims.get(tp)
            if best is None or sub.generation > best[0]:
                claims[tp] = (sub.generation, [member])
            elif sub.generation == best[0]:
                best[1].append(member)
    # Conflicts are settled among all claims first and only then is the winner's subscription
    # checked, as in Kafka: a stale claim does not revive because the newer owner unsubscribed.
    return {
        tp: claimants[0]
        for tp, (_, claimants) in claims.items()
        if len(claimants) == 1 and tp.topic in topics[claimants[0]]
    }


def _constrained(
    ordered: list[str], owner: Mapping[TopicPartition, str], topics: list[str], counts: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    """Kafka's ConstrainedAssignmentBuilder (all members subscribe to ``topics``), rack awareness aside.

    Kafka walks the members in HashMap order when it hands out the quotas with
    one partition extra; this walks them in member id order. Who gets an extra
    slot never changes how many owned partitions are kept.
    """
    total = sum(counts[t] for t in topics)
    min_quota, over = divmod(total, len(ordered))
    max_quota = min_quota + (1 if over else 0)
    filled_over = 0  # members given max_quota partitions so far; `over` of them in the end
    owned: dict[str, list[TopicPartition]] = {m: [] for m in ordered}
    for tp, member in owner.items():
        owned[member].append(tp)
    assignment: dict[str, list[TopicPartition]] = {m: [] for m in ordered}
    under_min: list[str] = []
    at_min: list[str] = []
    for member in ordered:
        # Kafka keeps the owned partitions with the lowest numbers (then topics) when it must trim.
        mine = sorted(owned[member], key=lambda tp: (tp.partition, tp.topic))
        if len(mine) < min_quota:
            assignment[member] = mine
            under_min.append(member)
        elif len(mine) >= max_quota and filled_over < over:
            filled_over += 1
            if filled_over == over:
                at_min.clear()
            assignment[member] = mine[:max_quota]
        else:
            assignment[member] = mine[:min_quota]
            if filled_over < over:
                at_min.append(member)
    taken = {tp for tps in assignment.values() for tp in tps}
    unassigned = [
        tp for topic in topics for tp in (TopicPartition(topic, p) for p in range(counts[topic])) if tp not in taken
    ]
    # Deal round-robin to the members under min_quota; once none is left, top up the members at
    # min_quota to max_quota, first come first served (Kafka's assignRoundRobin).
    at = 0
    for tp in unassigned:
        from_under = True
        if at < len(under_min):
            member = under_min[at]
        elif under_min:
            at = 0
            member = under_min[0]
        elif at_min:
            member = at_min.pop(0)
            from_under = False
        else:
            raise AssertionError(f"no member left to take {tp}: the quotas do not add up")
        assignment[member].append(tp)
        size = len(assignment[member])
        if size == min_quota and from_under:
            under_min.pop(at)
            at_min.append(member)
        else:
            if from_under:
                at += 1
            if size == max_quota:
                filled_over += 1
    return assignment


class _General:
    """Sticky assignment for differing subscriptions: balance first, then keep the most owners.

    The objective is Kafka's (balance, then stickiness) made exact: minimise
    ``W * sum(count**2) + moved`` where ``moved`` counts partitions leaving
    their valid owner and ``W`` exceeds any possible ``moved``. That is a
    min-cost flow with convex costs on the members' loads, and an assignment is
    optimal exactly when no *negative cycle* exists in its residual graph. Over
    members the residual graph has an edge a -> b when a holds a partition of a
    topic b subscribes to, costing ``[origin != b] - [origin != a]`` for the
    cheapest such partition (``origin`` = its owner before this rebalance), plus
    a load node L with edges b -> L costing ``W * (2 * count(b) + 1)`` and
    L -> a costing ``-W * (2 * count(a) - 1)``: a cycle through L moves one
    partition's worth of load along a chain of members, one not through L
    rotates partitions among members.

    Phase one removes the imbalance quickly (breadth-first chains from the
    fullest member to any member with at least two fewer); once no such chain
    exists the sum of squares is the least possible (the decreasingly minimal
    load vector of the partition-to-member transversal). Phase two cancels
    negative cycles found by Bellman-Ford until none is left; each cancellation
    lowers the integer objective, so it ends, and it ends optimal.
    """

    def __init__(
        self,
        ordered: list[str],
        topics: Mapping[str, frozenset[str]],
        counts: Mapping[str, int],
        owner: Mapping[TopicPartition, str],
    ) -> None:
        self.members = ordered
        self.topics = topics
        self.sorted_topics = {m: sorted(topics[m]) for m in ordered}
        self.load = dict.fromkeys(ordered, 0)
        # held[member][topic][origin] -> partition numbers; origin is the partition's owner before
        # this rebalance (None: nobody's). Emptied entries are deleted so a topic key means "holds some".
        self.held: dict[str, dict[str, dict[str | None, set[int]]]] = {m: {} for m in ordered}
        subscribers = {t: [m for m in ordered if t in topics[m]] for t in counts}
        # Kafka's GeneralAssignmentBuilder order: topics with fewer possible consumers first.
        self.order = sorted((t for t in counts if subscribers[t]), key=lambda t: (len(subscribers[t]), t))
        self.total = sum(counts[t] for t in self.order)
        for topic in self.order:
            for p in range(counts[topic]):
                member = owner.get(TopicPartition(topic, p))
                if member is not None:
                    self._add(member, topic, member, p)
        rank = {m: i for i, m in enumerate(ordered)}
        for topic in self.order:
            for p in range(counts[topic]):
                if TopicPartition(topic, p) not in owner:
                    member = min(subscribers[topic], key=lambda m: (self.load[m], rank[m]))
                    self._add(member, topic, None, p)

    def build(self) -> dict[str, list[TopicPartition]]:
        while self._balance_step():
            pass
        while self._cancel_negative_cycle():
            pass
        return {
            m: [TopicPartition(t, p) for t, by_origin in self.held[m].items() for ps in by_origin.values() for p in ps]
            for m in self.members
        }

    def _add(self, member: str, topic: str, origin: str | None, p: int) -> None:
        self.held[member].setdefault(topic, {}).setdefault(origin, set()).add(p)
        self.load[member] += 1

    def _move(self, source: str, target: str, topic: str, origin: str | None, p: int) -> None:
        by_origin = self.held[source][topic]
        by_origin[origin].remove(p)
        if not by_origin[origin]:
            del by_origin[origin]
            if not by_origin:
                del self.held[source][topic]
        self.load[source] -= 1
        self._add(target, topic, origin, p)

    def _cheapest(self, a: str, b: str) -> tuple[int, str, str | None, int] | None:
        """(cost, topic, origin, partition) of the partition a should hand to b, None if a holds nothing b takes.

        Cheapest first: one returning to b, its owner (-1); one that is neither's (0); one of a's own (+1).
        Ties go to the lowest (topic, partition), so the choice is independent of set and dict order.
        """
        held = self.held[a]
        best: tuple[int, str, str | None, int] | None = None
        for topic in self.sorted_topics[b]:
            by_origin = held.get(topic)
            if by_origin is None:
                continue
            if b in by_origin:
                return (-1, topic, b, min(by_origin[b]))
            if best is not None and best[0] <= 0:
                continue  # a later topic cannot beat a cost-0 choice from an earlier one
            foreign = [(min(ps), origin) for origin, ps in by_origin.items() if origin != a]
            if foreign:
                p, origin = min(foreign, key=lambda x: x[0])
                best = (0, topic, origin, p)
            elif best is None:
                best = (1, topic, a, min(by_origin[a]))
        return best

    def _can_take(self, a: str, b: str) -> bool:
        return not self.topics[b].isdisjoint(self.held[a].keys())

    def _shift(self, chain: list[str]) -> None:
        # Choose every hand-over before making any, so each member passes on a partition it held before.
        moves = []
        for a, b in pairwise(chain):
            cheapest = self._cheapest(a, b)
            assert cheapest is not None
            moves.append((a, b, cheapest))
        for a, b, (_, topic, origin, p) in moves:
            self._move(a, b, topic, origin, p)

    def _balance_step(self) -> bool:
        """Move one partition's worth of load from a member to one with two fewer; False when none can be."""
        for u in sorted(self.members, key=lambda m: (-self.load[m], m)):
            if self.load[u] < 2:
                return False
            parent: dict[str, str | None] = {u: None}
            queue = [u]
            for w in queue:
                for v in self.members:
                    if v not in parent and self._can_take(w, v):
                        parent[v] = w
                        queue.append(v)
            lighter = [v for v in queue if self.load[v] <= self.load[u] - 2]
            if not lighter:
                continue
            v: str | None = min(lighter, key=lambda m: (self.load[m], m))
            chain = []
            while v is not None:
                chain.append(v)
                v = parent[v]
            self._shift(chain[::-1])
            return True
        return False

    def _cancel_negative_cycle(self) -> bool:
        weight = self.total + 1  # more than any number of moves, so balance always comes first
        n = len(self.members)
        load_node = n
        index = {m: i for i, m in enumerate(self.members)}
        edges: list[tuple[int, int, int]] = []
        for a in self.members:
            if self.load[a]:
                edges.append((load_node, index[a], -weight * (2 * self.load[a] - 1)))
                for b in self.members:
                    if b != a:
                        cheapest = self._cheapest(a, b)
                        if cheapest is not None:
                            edges.append((index[a], index[b], cheapest[0]))
            edges.append((index[a], load_node, weight * (2 * self.load[a] + 1)))
        # Bellman-Ford from a virtual source joined to every node by a zero edge.
        dist = [0] * (n + 1)
        pred = [-1] * (n + 1)
        last = -1
        for _ in range(n + 1):
            last = -1
            for a, b, w in edges:
                if dist[a] + w < dist[b]:
                    dist[b] = dist[a] + w
                    pred[b] = a
                    last = b
            if last == -1:
                return False
        # Relaxed in pass n + 1: walking back n + 1 predecessors lands on a negative cycle.
        node = last
        for _ in range(n + 1):
            node = pred[node]
            assert node >= 0, "a node relaxed in the last pass has a predecessor chain"
        cycle = [node]
        step = pred[node]
        while step != node:
            cycle.append(step)
            step = pred[step]
        cycle.reverse()  # now in edge direction
        start = cycle.index(load_node) if load_node in cycle else 0
        cycle = cycle[start:] + cycle[:start]
        if cycle[0] == load_node:
            # L -> a ... -> b -> L: a chain from a to b; the load edges themselves move nothing.
            self._shift([self.members[i] for i in cycle[1:]])
        else:
            members = [self.members[i] for i in cycle]
            self._shift([*members, members[0]])
        return True
