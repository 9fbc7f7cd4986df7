//! Breach incidents and security events: listing, acknowledging, resolving and cleaning up incidents, and their reports.
