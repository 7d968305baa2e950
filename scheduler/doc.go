// Package scheduler runs warehouse imports on cron schedules and on
// manual-sync API calls, one run per import at a time. It arrives with the
// sync-runs issue.
package scheduler
