package sharedstate

import (
	"context"
	"time"
)

// noncePrefix starts the keys of the used requestState nonces.
const noncePrefix = KeyPrefix + "rs:"

// UseStateNonce marks the nonce of a requestState used for ttl (the
// state's remaining life) with one SET NX PX, atomic across replicas:
// fresh is false when a replica used it before. A ttl under a
// millisecond counts as one. The error is an [*Error]; the caller then
// refuses the retry (fail closed).
func (s *State) UseStateNonce(ctx context.Context, nonce string, ttl time.Duration) (fresh bool, err error) {
	fresh, err = s.client.SetNX(ctx, noncePrefix+nonce, 1, max(ttl, time.Millisecond)).Result()
	if err != nil {
		return false, s.wrap("requestState nonce", err)
	}
	return fresh, nil
}
