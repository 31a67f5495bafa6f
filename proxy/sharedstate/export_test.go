package sharedstate

import "time"

// SetOAuthLockTTL sets how long o's refresh locks live in Redis unless
// renewed or released (OAuthLockTTL by default).
func SetOAuthLockTTL(o *OAuthTokens, d time.Duration) { o.lockTTL = d }
