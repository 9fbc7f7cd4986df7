//! The compliance audit trail: a subject's entries, the chain's verification, and the retention round that trims old entries.
