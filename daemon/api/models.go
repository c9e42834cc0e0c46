package api

import "net/http"

// modelObject is one entry of /v1/models.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (h *Handler) modelObject() modelObject {
	return modelObject{ID: h.served.Name, Object: "model", Created: h.served.Created, OwnedBy: "tfd"}
}

// listModels answers GET /v1/models with the one served model.
func (h *Handler) listModels(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{"list", []modelObject{h.modelObject()}})
}

// getModel answers GET /v1/models/{id}.
func (h *Handler) getModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id != h.served.Name {
		if e := h.checkModel(id); e != nil {
			writeError(w, e)
			return
		}
	}
	WriteJSON(w, http.StatusOK, h.modelObject())
}

// health answers GET /health: 200 while the server takes requests. It needs no API key.
func (h *Handler) health(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "model": h.served.Name})
}
