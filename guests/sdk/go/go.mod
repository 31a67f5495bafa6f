module github.com/openclaw-go/openclaw/guests/sdk/go

go 1.26
