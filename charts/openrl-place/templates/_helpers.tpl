{{/*
The namespace every namespaced object goes to: namespace.name, or the
release's own when that is empty.
*/}}
{{- define "openrl-place.namespace" -}}
{{- .Values.namespace.name | default .Release.Namespace -}}
{{- end }}

{{/*
An object's labels and annotations. Call with (dict "ctx" $ "own" LABELS
"annotations" ANNOTATIONS): an object's own labels win over the chart's, the
chart's over commonLabels, so a selector label can never be overridden.
*/}}
{{- define "openrl-place.meta" -}}
{{- $ctx := .ctx -}}
{{- $chart := dict
      "app.kubernetes.io/part-of" "openrl-place"
      "app.kubernetes.io/managed-by" $ctx.Release.Service
      "app.kubernetes.io/instance" $ctx.Release.Name
      "helm.sh/chart" (printf "%s-%s" $ctx.Chart.Name ($ctx.Chart.Version | replace "+" "_")) -}}
{{- $labels := merge (dict) (.own | default dict) $chart $ctx.Values.commonLabels -}}
labels:
  {{- toYaml $labels | nindent 2 }}
{{- with merge (dict) (.annotations | default dict) $ctx.Values.commonAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* workerTemplates.allow as the scheduler reads it: TEMPLATE=FIELD,FIELD;... */}}
{{- define "openrl-place.templateAllow" -}}
{{- $entries := list -}}
{{- range $name, $fields := . -}}
{{- $entries = append $entries (printf "%s=%s" $name (join "," $fields)) -}}
{{- end -}}
{{- join ";" $entries -}}
{{- end }}

{{/* The scheduler's ServiceAccount, Roles and bindings share one name. */}}
{{- define "openrl-place.scheduler" -}}
{{- .Values.scheduler.name -}}
{{- end }}
