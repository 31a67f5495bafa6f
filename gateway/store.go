package gateway

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// Route is where a conversation's replies go: OpenClaw's session
// deliveryContext {channel, to, accountId, threadId}. A session without a
// route (Channel or To empty) is not a conversation for `openclaw mcp serve`.
type Route struct {
	// Channel is the channel plugin id, for example "imessage" or "telegram".
	Channel string `json:"channel"`
	// To is the channel-specific recipient (a phone number, a chat id, …).
	To string `json:"to"`
	// AccountID is the channel account; optional.
	AccountID string `json:"accountId,omitempty"`
	// ThreadID is the thread within the chat; optional. OpenClaw allows a
	// number here too; this Gateway keeps it as a string.
	ThreadID string `json:"threadId,omitempty"`
}

func (r *Route) valid() bool { return r != nil && r.Channel != "" && r.To != "" }

// sessionRecord is what sessions.json stores for one session.
type sessionRecord struct {
	Key         string `json:"key"`
	AgentID     string `json:"agentId"`
	SessionID   string `json:"sessionId"`
	DisplayName string `json:"displayName,omitempty"`
	Label       string `json:"label,omitempty"`
	Route       *Route `json:"route,omitempty"`
	CreatedAt   int64  `json:"createdAt"`
	UpdatedAt   int64  `json:"updatedAt"`
}

type sessionIndex struct {
	Version  int              `json:"version"`
	Sessions []*sessionRecord `json:"sessions"`
}

// storedMessage is one transcript entry: the message JSON exactly as served
// by sessions.get, plus the fields the Gateway looks things up by.
type storedMessage struct {
	id   string
	seq  int
	role string
	ts   int64
	raw  json.RawMessage
}

type session struct {
	rec      sessionRecord
	messages []*storedMessage
	byID     map[string]*storedMessage
}

// store holds sessions and transcripts, in memory and (when dir is set) on
// disk: dir/sessions.json (rewritten atomically on every metadata change) and
// dir/transcripts/<escaped key>.jsonl (one message per line, appended and
// synced). A torn last transcript line, left by a crash mid-write, is cut off
// on load. All methods are safe for concurrent use.
type store struct {
	dir      string
	mu       sync.Mutex
	sessions map[string]*session
}

const indexFile = "sessions.json"

func openStore(dir string) (*store, error) {
	s := &store{dir: dir, sessions: map[string]*session{}}
	if dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(filepath.Join(dir, "transcripts"), 0o700); err != nil {
		return nil, fmt.Errorf("gateway: creating state dir: %w", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, indexFile))
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: reading session index: %w", err)
	}
	var idx sessionIndex
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("gateway: session index %s: %w", filepath.Join(dir, indexFile), err)
	}
	for _, rec := range idx.Sessions {
		if rec == nil || rec.Key == "" {
			continue
		}
		sess := &session{rec: *rec, byID: map[string]*storedMessage{}}
		if err := s.loadTranscript(sess); err != nil {
			return nil, err
		}
		s.sessions[rec.Key] = sess
	}
	return s, nil
}

// transcriptPath names the JSONL file of a session key. Keys are escaped so
// that any key maps to one safe file name.
func (s *store) transcriptPath(key string) string {
	var b strings.Builder
	for _, c := range []byte(key) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return filepath.Join(s.dir, "transcripts", b.String()+".jsonl")
}

// loadTranscript reads a session's messages. An unparsable last line is a
// torn write and is truncated away; an unparsable line in the middle is
// corruption and an error naming the file and line.
func (s *store) loadTranscript(sess *session) error {
	path := s.transcriptPath(sess.rec.Key)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gateway: reading transcript: %w", err)
	}
	good := 0 // length of the prefix made of complete, valid lines
	line := 0
	for off := 0; off < len(data); {
		line++
		end := bytes.IndexByte(data[off:], '\n')
		last := end < 0
		if last {
			end = len(data) - off
		}
		chunk := data[off : off+end]
		m, perr := parseStored(chunk)
		if perr != nil {
			if last || len(bytes.TrimSpace(data[off+end:])) == 0 {
				break // torn tail
			}
			return fmt.Errorf("gateway: transcript %s line %d: %w", path, line, perr)
		}
		if m != nil {
			sess.add(m)
		}
		off += end + 1
		if last {
			off = len(data)
		}
		good = min(off, len(data))
	}
	if good < len(data) || (good > 0 && data[good-1] != '\n') {
		// Cut the torn tail and make sure the file ends with a newline.
		f, err := os.OpenFile(path, os.O_RDWR, 0o600)
		if err != nil {
			return fmt.Errorf("gateway: repairing transcript: %w", err)
		}
		defer f.Close()
		if err := f.Truncate(int64(good)); err != nil {
			return fmt.Errorf("gateway: repairing transcript %s: %w", path, err)
		}
		if good > 0 && data[good-1] != '\n' {
			if _, err := f.WriteAt([]byte{'\n'}, int64(good)); err != nil {
				return fmt.Errorf("gateway: repairing transcript %s: %w", path, err)
			}
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("gateway: repairing transcript %s: %w", path, err)
		}
	}
	return nil
}

func parseStored(line []byte) (*storedMessage, error) {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil, nil
	}
	var m struct {
		Role      string `json:"role"`
		Timestamp int64  `json:"timestamp"`
		OC        struct {
			ID  string `json:"id"`
			Seq int    `json:"seq"`
		} `json:"__openclaw"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, err
	}
	if m.OC.ID == "" || m.OC.Seq <= 0 {
		return nil, errors.New("message without __openclaw.id and seq")
	}
	return &storedMessage{id: m.OC.ID, seq: m.OC.Seq, role: m.Role, ts: m.Timestamp,
		raw: json.RawMessage(bytes.Clone(line))}, nil
}

func (sess *session) add(m *storedMessage) {
	sess.messages = append(sess.messages, m)
	sess.byID[m.id] = m
}

// saveIndexLocked rewrites sessions.json atomically (temp file, fsync,
// rename). s.mu must be held.
func (s *store) saveIndexLocked() error { return s.writeIndexLocked(true) }

// writeIndexLocked rewrites sessions.json through a temp file and a rename;
// sync false skips the fsync, for changes a crash may lose (updatedAt).
func (s *store) writeIndexLocked(sync bool) error {
	if s.dir == "" {
		return nil
	}
	idx := sessionIndex{Version: 1}
	for _, sess := range s.sessions {
		rec := sess.rec
		idx.Sessions = append(idx.Sessions, &rec)
	}
	sort.Slice(idx.Sessions, func(i, j int) bool { return idx.Sessions[i].Key < idx.Sessions[j].Key })
	data, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(s.dir, indexFile), append(data, '\n'), sync)
}

func writeFileAtomic(path string, data []byte, sync bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("gateway: writing %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil && sync {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("gateway: writing %s: %w", path, werr)
	}
	return nil
}

// upsertLocked creates the session key or updates its metadata; zero fields
// of upd leave the stored value alone. s.mu must be held.
func (s *store) upsertLocked(upd sessionRecord, now int64) (*session, error) {
	sess, ok := s.sessions[upd.Key]
	if !ok {
		rec := upd
		if rec.AgentID == "" {
			rec.AgentID = agentIDFromKey(rec.Key)
		}
		if rec.SessionID == "" {
			rec.SessionID = "sess-" + uuid.NewString()
		}
		if rec.CreatedAt == 0 {
			rec.CreatedAt = now
		}
		if rec.UpdatedAt == 0 {
			rec.UpdatedAt = now
		}
		sess = &session{rec: rec, byID: map[string]*storedMessage{}}
		s.sessions[upd.Key] = sess
		if err := s.saveIndexLocked(); err != nil {
			delete(s.sessions, upd.Key)
			return nil, err
		}
		return sess, nil
	}
	old := sess.rec
	if upd.DisplayName != "" {
		sess.rec.DisplayName = upd.DisplayName
	}
	if upd.Label != "" {
		sess.rec.Label = upd.Label
	}
	if upd.Route != nil {
		r := *upd.Route
		sess.rec.Route = &r
	}
	if upd.SessionID != "" && len(sess.messages) == 0 {
		sess.rec.SessionID = upd.SessionID
	}
	if upd.UpdatedAt > sess.rec.UpdatedAt {
		sess.rec.UpdatedAt = upd.UpdatedAt
	}
	if sess.rec == old {
		return sess, nil
	}
	if err := s.saveIndexLocked(); err != nil {
		sess.rec = old
		return nil, err
	}
	return sess, nil
}

// newMessage describes a transcript entry to append: body holds role,
// content, timestamp and any other top-level fields; ocBefore and ocAfter are
// extra __openclaw fields written before and after the id.
type newMessage struct {
	id       string
	role     string
	ts       int64
	body     object
	ocBefore object
	ocAfter  object
}

// appendLocked adds one message to the session's transcript, assigning its
// id (when nm.id is empty), seq and transcript position, and persists it
// before it becomes visible. A live message (live true) also moves the
// session's updatedAt to now; seeded history does not. s.mu must be held.
func (s *store) appendLocked(sess *session, nm newMessage, now int64, live bool) (*storedMessage, error) {
	if nm.id == "" {
		nm.id = uuid.NewString()
	}
	if _, dup := sess.byID[nm.id]; dup {
		return nil, fmt.Errorf("gateway: session %s already has message %s", sess.rec.Key, nm.id)
	}
	seq := len(sess.messages) + 1
	if n := len(sess.messages); n > 0 && sess.messages[n-1].seq >= seq {
		seq = sess.messages[n-1].seq + 1
	}
	oc := append(object{}, nm.ocBefore...)
	oc = oc.set("id", nm.id)
	oc = append(oc, nm.ocAfter...)
	oc = oc.set("recordTimestampMs", now).
		set("transcriptPosition", object{{"source", transcriptSource(sess.rec.AgentID, sess.rec.SessionID)}, {"rawSeq", seq}}).
		set("seq", seq)
	body := append(object{}, nm.body...)
	body = body.set("__openclaw", oc)
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("gateway: encoding message: %w", err)
	}
	if s.dir != "" {
		if err := appendLine(s.transcriptPath(sess.rec.Key), raw); err != nil {
			return nil, err
		}
	}
	m := &storedMessage{id: nm.id, seq: seq, role: nm.role, ts: nm.ts, raw: raw}
	sess.add(m)
	if live && now > sess.rec.UpdatedAt {
		sess.rec.UpdatedAt = now
		// The message itself is durable already; a failure to persist the
		// new updatedAt only makes it older after a restart, so it must not
		// fail the append (a retried append would duplicate the message),
		// and it is not worth an fsync.
		_ = s.writeIndexLocked(false)
	}
	return m, nil
}

func appendLine(path string, line []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("gateway: appending to transcript: %w", err)
	}
	buf := make([]byte, 0, len(line)+1)
	buf = append(append(buf, line...), '\n')
	_, err = f.Write(buf)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("gateway: appending to transcript %s: %w", path, err)
	}
	return nil
}

// updatedAt is the session row's updatedAt (Unix ms).
func (sess *session) updatedAt() int64 { return sess.rec.UpdatedAt }

// transcriptSource is the opaque transcriptPosition.source of a session's
// transcript: base64url(sha256(agentId "/" sessionId)), the same 43-character
// form OpenClaw uses.
func transcriptSource(agentID, sessionID string) string {
	sum := sha256.Sum256([]byte(agentID + "/" + sessionID))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// agentIDFromKey returns the agent id of a key of the form
// "agent:<agentId>:<rest>", else "main".
func agentIDFromKey(key string) string {
	parts := strings.SplitN(key, ":", 3)
	if len(parts) == 3 && parts[0] == "agent" && parts[1] != "" {
		return parts[1]
	}
	return "main"
}

// randomToken returns n random bytes, base64url-encoded.
func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		panic("gateway: crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
