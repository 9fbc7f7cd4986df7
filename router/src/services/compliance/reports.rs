//! Compliance reports: the framework status and the SOC 2 report, judged from the cluster's own records.
