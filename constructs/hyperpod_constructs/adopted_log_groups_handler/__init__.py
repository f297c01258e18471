"""Lambda code of :class:`hyperpod_constructs.adopted_log_groups.AdoptedLogGroups` (this folder is the asset)."""
