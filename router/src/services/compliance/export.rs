//! Data-subject export (GDPR art. 15/20, CCPA): finding a subject's records in every store and packaging them.
