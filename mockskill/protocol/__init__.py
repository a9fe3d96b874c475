"""What the skill protocol says, knowing nothing of scenarios or HTTP servers.

This stage owns the error chapter's table of codes, categories, statuses and
retry advice (``catalog``), protocol versions and ranges (``versions``), the
skill descriptor a provider publishes (``descriptor``; its JSON Schema is the
published ``mockskill/descriptor.schema.json``), the reference validator of
descriptors (``validator``), the corpus of invalid descriptors (``corpus``),
and the one JSON style in which mockskill writes every document it puts on
the wire (``jsonstyle``).

It may import nothing of mockskill: every other stage builds on it.
"""
