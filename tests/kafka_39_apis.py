"""The API versions a Kafka 3.9 broker serves, from the ``validVersions`` of Kafka 3.9's
request schemas (clients/src/main/resources/common/message/*Request.json) whose listeners
include ``broker``, leaving out APIs whose only version is still unstable (share groups)."""

from __future__ import annotations

KAFKA_39_VERSIONS: dict[int, tuple[int, int]] = {
    0: (0, 11),  # Produce
    1: (0, 17),  # Fetch
    2: (0, 9),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (0, 9),  # OffsetCommit
    9: (0, 9),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups
    17: (0, 1),  # SaslHandshake
    18: (0, 4),  # ApiVersions
    19: (0, 7),  # CreateTopics
    20: (0, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId
    23: (0, 4),  # OffsetForLeaderEpoch
    24: (0, 5),  # AddPartitionsToTxn
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 4),  # EndTxn
    27: (0, 1),  # WriteTxnMarkers
    28: (0, 4),  # TxnOffsetCommit
    29: (0, 3),  # DescribeAcls
    30: (0, 3),  # CreateAcls
    31: (0, 3),  # DeleteAcls
    32: (0, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    34: (0, 2),  # AlterReplicaLogDirs
    35: (0, 4),  # DescribeLogDirs
    36: (0, 2),  # SaslAuthenticate
    37: (0, 3),  # CreatePartitions
    38: (0, 3),  # CreateDelegationToken
    39: (0, 2),  # RenewDelegationToken
    40: (0, 2),  # ExpireDelegationToken
    41: (0, 3),  # DescribeDelegationToken
    42: (0, 2),  # DeleteGroups
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 0),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    47: (0, 0),  # OffsetDelete
    48: (0, 1),  # DescribeClientQuotas
    49: (0, 1),  # AlterClientQuotas
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    55: (0, 2),  # DescribeQuorum
    57: (0, 1),  # UpdateFeatures
    60: (0, 1),  # DescribeCluster
    61: (0, 0),  # DescribeProducers
    64: (0, 0),  # UnregisterBroker
    65: (0, 0),  # DescribeTransactions
    66: (0, 1),  # ListTransactions
    68: (0, 0),  # ConsumerGroupHeartbeat
    69: (0, 0),  # ConsumerGroupDescribe
    71: (0, 0),  # GetTelemetrySubscriptions
    72: (0, 0),  # PushTelemetry
    74: (0, 0),  # ListClientMetricsResources
    75: (0, 0),  # DescribeTopicPartitions
    80: (0, 0),  # AddRaftVoter
    81: (0, 0),  # RemoveRaftVoter
}

# Versions Kafka 3.9 serves and onceflow does not: removed by Kafka 4.0 (KIP-896), so kio
# models none of them, and they carry message formats v0 and v1, which onceflow does not
# convert (docs/compatibility.md, "Known differences").
REMOVED_NOT_SERVED: dict[int, range] = {
    0: range(0, 3),  # Produce v0-2
    1: range(0, 4),  # Fetch v0-3
}
