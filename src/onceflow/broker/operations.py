"""The operations a client may perform, as answered when it asks (Metadata, DescribeCluster).

Without an authorizer Kafka allows everything, so the answer is every operation the
resource type supports, as a bit field of Kafka's AclOperation codes.
"""

NOT_ASKED = -(2**31)

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12


def bit_field(*codes: int) -> int:
    return sum(1 << code for code in codes)


CLUSTER_OPERATIONS = bit_field(
    CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
)
TOPIC_OPERATIONS = bit_field(
    READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
)
