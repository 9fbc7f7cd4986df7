//! The consent-expiry round: consents past their expiry are withdrawn and their data erased as configured.
