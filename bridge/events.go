package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/openclaw-go/openclaw/internal/jsonw"
	"regexp"
	"strings"

	"github.com/openclaw-go/openclaw/gateway/protocol"
	"github.com/openclaw-go/openclaw/policies"
)

// Claude channel notification methods (docs/protocol-facts.md, Claude channel mode).
const (
	MethodClaudeChannel                  = "notifications/claude/channel"
	MethodClaudePermission               = "notifications/claude/channel/permission"
	MethodClaudePermissionRequest        = "notifications/claude/channel/permission_request"
	nonTextContent                string = "[non-text message]"
)

// sessionMessage is the part of a session.message payload the bridge reads
// (docs/protocol-facts.md, Gateway events and Event queue); the payload itself is kept whole as the event's raw.
type sessionMessage struct {
	SessionKey json.RawMessage `json:"sessionKey"`
	Message    struct {
		Role    json.RawMessage `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	MessageID     json.RawMessage `json:"messageId"`
	MessageSeq    json.RawMessage `json:"messageSeq"`
	LastChannel   json.RawMessage `json:"lastChannel"`
	LastTo        json.RawMessage `json:"lastTo"`
	LastAccountID json.RawMessage `json:"lastAccountId"`
	LastThreadID  json.RawMessage `json:"lastThreadId"`
	SenderIsOwner json.RawMessage `json:"senderIsOwner"`
}

// decodeSessionMessage reads the members the bridge needs from a
// session.message payload with the skipping scanner; the values alias
// payload. A later duplicate key wins, as with encoding/json.
func decodeSessionMessage(payload []byte) (*sessionMessage, error) {
	m := &sessionMessage{}
	err := jsonw.Members(payload, func(k, v []byte) {
		switch string(k) {
		case "sessionKey":
			m.SessionKey = v
		case "messageId":
			m.MessageID = v
		case "messageSeq":
			m.MessageSeq = v
		case "lastChannel":
			m.LastChannel = v
		case "lastTo":
			m.LastTo = v
		case "lastAccountId":
			m.LastAccountID = v
		case "lastThreadId":
			m.LastThreadID = v
		case "senderIsOwner":
			m.SenderIsOwner = v
		case "message":
			if kindOf(v) == kindObject {
				_ = jsonw.Members(v, func(k, v []byte) {
					switch string(k) {
					case "role":
						m.Message.Role = v
					case "content":
						m.Message.Content = v
					}
				})
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// messageText returns a message's text: content itself when it is a string,
// else the text of the first content block; ok is false when there is none.
func messageText(content json.RawMessage) (string, bool) {
	switch kindOf(content) {
	case kindString:
		return rawString(content)
	case kindArray:
		first := jsonw.FirstElement(content)
		if kindOf(first) != kindObject {
			return "", false
		}
		var text json.RawMessage
		if jsonw.Members(first, func(k, v []byte) {
			if string(k) == "text" {
				text = v
			}
		}) != nil {
			return "", false
		}
		return rawString(text)
	}
	return "", false
}

// permissionReply matches an owner's answer to a Claude permission request.
var permissionReply = regexp.MustCompile(`(?i)^(yes|no)\s+([a-km-z]{5})$`)

func (b *Bridge) onSessionMessage(payload json.RawMessage) error {
	m, err := decodeSessionMessage(payload)
	if err != nil {
		return fmt.Errorf("decoding payload: %w", err)
	}
	sessionKey, ok := nonEmptyString(m.SessionKey)
	if !ok {
		return nil // not an error: OpenClaw ignores such events
	}
	role, hasRole := rawString(m.Message.Role)
	text, hasText := messageText(m.Message.Content)

	if role == "user" && string(m.SenderIsOwner) == "true" && hasText {
		if g := permissionReply.FindStringSubmatch(strings.TrimSpace(text)); g != nil {
			id := strings.ToLower(g[2])
			if b.claude.isPending(id) {
				behavior := "deny"
				if strings.HasPrefix(strings.ToLower(g[1]), "y") {
					behavior = "allow"
				}
				o := jsonw.NewObject(nil)
				o.Str("request_id", id)
				o.Str("behavior", behavior)
				b.notify(MethodClaudePermission, o.Close(), func() { b.claude.done(id) })
				return nil
			}
		}
	}

	var conv *Conversation
	if ch, ok := nonEmptyString(m.LastChannel); ok {
		if to, ok := nonEmptyString(m.LastTo); ok {
			conv = &Conversation{SessionKey: sessionKey, Channel: strings.ToLower(ch), To: to,
				ThreadID: firstPresent(m.LastThreadID)}
			conv.AccountID, _ = nonEmptyString(m.LastAccountID)
		}
	}
	messageID, hasID := rawString(m.MessageID)

	o := jsonw.NewObject(make([]byte, 0, len(payload)+256))
	o.Str("type", "message")
	o.Str("sessionKey", sessionKey)
	if conv != nil {
		o.Key("conversation")
		o.Buf = conv.appendJSON(o.Buf)
	}
	if hasID {
		o.Str("messageId", messageID)
	}
	if kindOf(m.MessageSeq) == kindNumber {
		o.Raw("messageSeq", jsonw.Compact(m.MessageSeq))
	}
	if hasRole {
		o.Str("role", role)
	}
	if hasText {
		o.Str("text", text)
	}
	// payload is passed through as it came: the Gateway sends compact JSON,
	// and go-sdk compacts structured content when it writes it anyway.
	o.Raw("raw", payload)
	b.queue.push(sessionKey, o.Close())

	if b.channelOn() && role == "user" && conv != nil {
		content := text
		if !hasText || text == "" {
			content = nonTextContent
		}
		n := jsonw.NewObject(nil)
		n.Str("content", content)
		n.Key("meta")
		meta := jsonw.NewObject(n.Buf)
		meta.Str("session_key", sessionKey)
		meta.Str("channel", conv.Channel)
		meta.Str("to", conv.To)
		meta.Str("account_id", conv.AccountID)
		meta.Str("thread_id", threadIDString(conv.ThreadID))
		meta.Str("message_id", messageID)
		n.Buf = meta.Close()
		b.notify(MethodClaudeChannel, n.Close(), nil)
	}
	return nil
}

func (b *Bridge) onApproval(name string, payload json.RawMessage) error {
	if kindOf(payload) != kindObject {
		return errors.New("payload is not an object")
	}
	var typ string
	switch name {
	case protocol.EventExecApprovalRequested:
		typ = "exec_approval_requested"
		b.approvals.track("exec", payload)
		defer b.onGatewayApprovalRequested(policies.ApprovalExec, payload)
	case protocol.EventPluginApprovalRequested:
		typ = "plugin_approval_requested"
		b.approvals.track("plugin", payload)
		defer b.onGatewayApprovalRequested(policies.ApprovalPlugin, payload)
	case protocol.EventExecApprovalResolved:
		typ = "exec_approval_resolved"
		b.approvals.resolve(payload)
		b.forgetGatewayApproval(payload)
	case protocol.EventPluginApprovalResolved:
		typ = "plugin_approval_resolved"
		b.approvals.resolve(payload)
		b.forgetGatewayApproval(payload)
	}
	o := jsonw.NewObject(make([]byte, 0, len(payload)+48))
	o.Str("type", typ)
	o.Raw("raw", payload)
	b.queue.push("", o.Close())
	return nil
}

// claudePermissionRequest is the params object of
// notifications/claude/channel/permission_request; all four are required.
type claudePermissionRequest struct {
	RequestID    *string `json:"request_id"`
	ToolName     *string `json:"tool_name"`
	Description  *string `json:"description"`
	InputPreview *string `json:"input_preview"`
}

// onClaudePermissionRequest records a permission request from the Claude
// client and queues a claude_permission_request event. It is not gated by
// the channel mode (docs/protocol-facts.md, Claude channel mode).
func (b *Bridge) onClaudePermissionRequest(params json.RawMessage) error {
	var p claudePermissionRequest
	if err := json.Unmarshal(params, &p); err != nil {
		return fmt.Errorf("decoding params: %w", err)
	}
	if p.RequestID == nil || p.ToolName == nil || p.Description == nil || p.InputPreview == nil {
		return errors.New("params need the strings request_id, tool_name, description and input_preview")
	}
	b.claude.add(*p.RequestID)
	if b.verbose {
		b.log.Info("openclaw mcp: pending Claude permission " + *p.RequestID)
	}
	o := jsonw.NewObject(nil)
	o.Str("type", "claude_permission_request")
	o.Str("requestId", *p.RequestID)
	o.Str("toolName", *p.ToolName)
	o.Str("description", *p.Description)
	o.Str("inputPreview", *p.InputPreview)
	b.queue.push("", o.Close())
	return nil
}
