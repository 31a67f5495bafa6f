module github.com/openclaw-go/openclaw/guests/examples/go

go 1.26

require github.com/openclaw-go/openclaw/guests/sdk/go v0.0.0

replace github.com/openclaw-go/openclaw/guests/sdk/go => ../../sdk/go
