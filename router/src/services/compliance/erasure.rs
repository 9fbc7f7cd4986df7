//! Right to erasure (GDPR art. 17): erasure jobs across every store, signed certificates, and their re-application after a restore.
