package dislocal

import (
	"net/http"
	"unicode"
	"unicode/utf8"

	"github.com/disgw/disgw/disbackend/disapi"
)

// Stream tags (docs/dis-api.md §5.2): keyed by stream_id under the singular
// /stream/ path; at most disapi.MaxTagsPerStream (10) per stream; key
// 1-disapi.MaxTagKeyLen (36) characters, value at most disapi.MaxTagValueLen
// (43), of letters (CJK included), digits, '-' and '_' (values also '.').

func validTagChars(s string, dot bool) bool {
	for _, c := range s {
		if !(unicode.IsLetter(c) || unicode.IsDigit(c) || c == '-' || c == '_' || dot && c == '.') {
			return false
		}
	}
	return true
}

func checkTag(t tag) *disError {
	if n := utf8.RuneCountInString(t.Key); n == 0 || n > disapi.MaxTagKeyLen || !validTagChars(t.Key, false) {
		return errInvalid("tag key %q must be 1-%d letters, digits, '-' or '_'", t.Key, disapi.MaxTagKeyLen)
	}
	if n := utf8.RuneCountInString(t.Value); n > disapi.MaxTagValueLen || !validTagChars(t.Value, true) {
		return errInvalid("tag value %q must be at most %d letters, digits, '-', '_' or '.'", t.Value, disapi.MaxTagValueLen)
	}
	return nil
}

// checkTags validates adding add to have; it returns the DIS error or nil.
func checkTags(add, have []tag) *disError {
	keys := map[string]bool{}
	for _, t := range have {
		keys[t.Key] = true
	}
	seen := map[string]bool{}
	for _, t := range add {
		if derr := checkTag(t); derr != nil {
			return derr
		}
		if seen[t.Key] {
			return errInvalid("tag key %q is given twice", t.Key)
		}
		seen[t.Key] = true
		keys[t.Key] = true
	}
	if len(keys) > disapi.MaxTagsPerStream {
		return errf(400, disapi.CodeTagQuota, "The number of tags exceeds the maximum. [%d; a stream may have %d]", len(keys), disapi.MaxTagsPerStream)
	}
	return nil
}

// upsertTags adds or overwrites tags by key.
func upsertTags(have, add []tag) []tag {
	for _, t := range add {
		replaced := false
		for i := range have {
			if have[i].Key == t.Key {
				have[i].Value = t.Value
				replaced = true
			}
		}
		if !replaced {
			have = append(have, t)
		}
	}
	sortTags(have)
	return have
}

func (s *Server) streamTags(r *http.Request, vars map[string]string, _ []byte) (int, any, *disError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ss, derr := s.streamByID(r.Context(), vars["stream_id"])
	if derr != nil {
		return 0, nil, derr
	}
	return http.StatusOK, map[string]any{"tags": nonNilTags(ss.Tags)}, nil
}

func (s *Server) createTag(r *http.Request, vars map[string]string, body []byte) (int, any, *disError) {
	var req struct {
		Tag *tag `json:"tag"`
	}
	if derr := decodeBody(body, &req); derr != nil {
		return 0, nil, derr
	}
	if req.Tag == nil {
		return 0, nil, errInvalid("tag is required")
	}
	return s.changeTags(r, vars["stream_id"], "create", []tag{*req.Tag})
}

func (s *Server) batchTags(r *http.Request, vars map[string]string, body []byte) (int, any, *disError) {
	var req struct {
		Action string `json:"action"`
		Tags   []tag  `json:"tags"`
	}
	if derr := decodeBody(body, &req); derr != nil {
		return 0, nil, derr
	}
	if req.Action != "create" && req.Action != "delete" {
		return 0, nil, errf(400, disapi.CodeTagActionUnsupported, "The tag action is not supported. [%q; only create and delete]", req.Action)
	}
	if req.Tags == nil {
		return 0, nil, errInvalid("tags is required")
	}
	return s.changeTags(r, vars["stream_id"], req.Action, req.Tags)
}

func (s *Server) deleteTag(r *http.Request, vars map[string]string, _ []byte) (int, any, *disError) {
	s.mu.Lock()
	_, ss, derr := s.streamByID(r.Context(), vars["stream_id"])
	if derr == nil {
		found := false
		for _, t := range ss.Tags {
			found = found || t.Key == vars["key"]
		}
		if !found {
			derr = errf(400, disapi.CodeTagKeyNotFound, "The tag key does not exist. [%s]", vars["key"])
		}
	}
	s.mu.Unlock()
	if derr != nil {
		return 0, nil, derr
	}
	return s.changeTags(r, vars["stream_id"], "delete", []tag{{Key: vars["key"]}})
}

// changeTags creates (overwriting values of existing keys) or deletes
// (ignoring missing keys, as DIS's batch delete does) tags. 204.
func (s *Server) changeTags(r *http.Request, id, action string, tags []tag) (int, any, *disError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ss, derr := s.streamByID(r.Context(), id)
	if derr != nil {
		return 0, nil, derr
	}
	if action == "create" {
		if derr := checkTags(tags, ss.Tags); derr != nil {
			return 0, nil, derr
		}
		ss.Tags = upsertTags(ss.Tags, tags)
	} else {
		drop := map[string]bool{}
		for _, t := range tags {
			if t.Key == "" {
				return 0, nil, errInvalid("tag key is required")
			}
			drop[t.Key] = true
		}
		kept := ss.Tags[:0]
		for _, t := range ss.Tags {
			if !drop[t.Key] {
				kept = append(kept, t)
			}
		}
		ss.Tags = kept
	}
	if derr := s.saveState(); derr != nil {
		return 0, nil, derr
	}
	return http.StatusNoContent, nil, nil
}

// listAllTags is every tag key of the project's streams with its values.
func (s *Server) listAllTags(r *http.Request, _ map[string]string, _ []byte) (int, any, *disError) {
	all, err := s.b.ListStreams(r.Context())
	if err != nil {
		return 0, nil, backendError(err, "", "", "")
	}
	s.mu.Lock()
	values := map[string]map[string]bool{}
	for _, bs := range all {
		for _, t := range s.stateFor(bs).Tags {
			if values[t.Key] == nil {
				values[t.Key] = map[string]bool{}
			}
			values[t.Key][t.Value] = true
		}
	}
	s.mu.Unlock()
	type keyValues struct {
		Key    string   `json:"key"`
		Values []string `json:"values"`
	}
	out := []keyValues{}
	for _, k := range sortedKeys(values) {
		out = append(out, keyValues{Key: k, Values: sortedKeys(values[k])})
	}
	return http.StatusOK, map[string]any{"tags": out}, nil
}

type tagFilter struct {
	Key    string   `json:"key"`
	Values []string `json:"values"`
}

// resourcesByTags is the filter/count action: streams having every tag of
// "tags" (a key with any of its values, or any value when none is given).
// tags_any, not_tags, not_tags_any and matches are not applied.
func (s *Server) resourcesByTags(r *http.Request, _ map[string]string, body []byte) (int, any, *disError) {
	var req struct {
		Action string      `json:"action"`
		Limit  string      `json:"limit"`
		Offset string      `json:"offset"`
		Tags   []tagFilter `json:"tags"`
	}
	if derr := decodeBody(body, &req); derr != nil {
		return 0, nil, derr
	}
	if req.Action != "filter" && req.Action != "count" {
		return 0, nil, errInvalid("action %q must be filter or count", req.Action)
	}
	limit, derr := intParam(req.Limit, "limit", disapi.MaxTagFilterLimit, 1, disapi.MaxTagFilterLimit)
	if derr != nil {
		return 0, nil, derr
	}
	offset, derr := intParam(req.Offset, "offset", 0, 0, 1<<30)
	if derr != nil {
		return 0, nil, derr
	}
	all, err := s.b.ListStreams(r.Context())
	if err != nil {
		return 0, nil, backendError(err, "", "", "")
	}
	type resource struct {
		ResourceID   string `json:"resource_id"`
		ResourceName string `json:"resource_name"`
		Tags         []tag  `json:"tags"`
	}
	var matched []resource
	s.mu.Lock()
	for _, bs := range all {
		ss := s.stateFor(bs)
		if tagsMatch(ss.Tags, req.Tags) {
			matched = append(matched, resource{ResourceID: ss.StreamID, ResourceName: bs.Name, Tags: nonNilTags(ss.Tags)})
		}
	}
	s.mu.Unlock()
	if req.Action == "count" {
		return http.StatusOK, map[string]any{"total_count": len(matched)}, nil
	}
	page := []resource{}
	for i := offset; i < len(matched) && len(page) < limit; i++ {
		page = append(page, matched[i])
	}
	return http.StatusOK, map[string]any{"resources": page, "total_count": len(matched)}, nil
}

func tagsMatch(have []tag, want []tagFilter) bool {
	for _, f := range want {
		ok := false
		for _, t := range have {
			if t.Key == f.Key && (len(f.Values) == 0 || contains(f.Values, t.Value)) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
