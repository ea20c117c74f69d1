"""What ``lakelog serve`` protects the network with, kept in the store so every agent shares it.

* :mod:`engine.security.scram` -- users' SCRAM credentials (salt, iterations, stored and
  server keys; never a password) under ``_lakelog/security/users/``, and the PLAIN check
  against them;
* :mod:`engine.security.acls` -- ACL bindings under ``_lakelog/security/acls/`` and the
  authorization decision, a pure function as Kafka's StandardAuthorizer decides.

Both are plain objects beside the Delta log (one per user, one per binding, each written
whole), like the groups' leases: Delta readers and VACUUM leave ``_``-prefixed directories alone.
"""
