"""A Kafka-protocol endpoint over a lakelog store (``lakelog serve``): Kafka clients and tools
produce to and fetch from the store's topics; every write goes through the commit core."""
