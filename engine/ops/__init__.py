"""Operations on a cluster's data: retention, compaction, balance, heat, maintenance."""
